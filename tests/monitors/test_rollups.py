"""The roll-ups the analysis writes equal a recomputation from the calls, whatever order the spans came
in and however often a run was analysed again (late calls, new prices)."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxview import writes
from ingest.models import Run
from ingest.rollups import FirstSeen, Rollup
from tests import factories
from tests.monitors.helpers import post, recomputed, request_of, rounded, run_spans, stored

pytestmark = pytest.mark.django_db


def _send_all(client, key, batches, django_capture_on_commit_callbacks):
    for body in batches:
        with django_capture_on_commit_callbacks(execute=True):
            post(client, key, body)


runs_strategy = st.lists(
    st.tuples(
        st.integers(1, 70),  # calls
        st.one_of(st.none(), st.integers(2, 70)),  # the system prompt changes at
        st.one_of(st.none(), st.integers(2, 70)),  # a volatile time line from
    ),
    min_size=1,
    max_size=3,
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    runs=runs_strategy,
    seed=st.integers(0, 10**6),
    batch=st.integers(1, 40),
    reprice=st.booleans(),
)
def test_rollups_equal_a_recomputation_from_the_calls(
    client, django_capture_on_commit_callbacks, runs, seed, batch, reprice
):
    project, key = factories.project_with_key(
        f"r{random.Random(seed).randrange(10**9)}-{Run.objects.count()}"
    )
    spans = [
        span
        for number, (calls, changed, volatile) in enumerate(runs)
        for span in run_spans(number, calls, changed, volatile)
    ]
    random.Random(seed).shuffle(spans)  # calls arrive out of order: runs are analysed again
    _send_all(
        client,
        key,
        [request_of(spans[start : start + batch]) for start in range(0, len(spans), batch)],
        django_capture_on_commit_callbacks,
    )
    if reprice:  # new prices: every run analysed again from its first call
        with django_capture_on_commit_callbacks(execute=True):
            writes.set_prices(
                project,
                [{"model": "m1", "input": 3, "output": 15, "cache_read": 0.3, "cache_write_5m": 3.75}],
            )
    for run in Run.objects.filter(project=project):
        assert run.analysed_seq == run.call_count
    assert rounded(stored(project)) == rounded(recomputed(project))
    assert sum(row.calls for row in Rollup.objects.filter(project=project)) == sum(
        calls for calls, _, _ in runs
    )


def test_a_break_is_first_seen_once_per_scope_with_its_item_and_bytes(
    client, django_capture_on_commit_callbacks
):
    project, key = factories.project_with_key("first-seen")
    _send_all(
        client, key, [request_of(run_spans(0, 12, volatile_from=6))], django_capture_on_commit_callbacks
    )
    _send_all(
        client, key, [request_of(run_spans(1, 12, volatile_from=4))], django_capture_on_commit_callbacks
    )
    seen = {row.name: row for row in FirstSeen.objects.filter(project=project, kind="cause")}
    assert set(seen) >= {"volatile_system_prompt"}
    first = seen["volatile_system_prompt"]
    run0 = Run.objects.get(project=project, key="monitors-0")
    assert (first.run_id, first.service, first.model) == (run0.id, "agent", "m1")
    assert first.item_kind == "system" and first.item_id
    # Call 6 added the time line (system_changed); call 7 is the first whose line differs: the bytes.
    assert (first.call_seq, first.detail["bytes"]["new"]) == (7, "7")
    assert first.detail["bytes"]["before"].endswith("time: 2026-05-01T10:00:0")
    assert seen["system_changed"].call_seq == 6 and seen["system_changed"].run_id == run0.id
