"""Hostile but valid requests all the way into PostgreSQL: the batch task stores them (never FAILED: that
would drop the acknowledged spans beside the bad one) and the analysis covers every call."""

import os
import zlib

import pytest
from django.db import connection
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from ingest import otlp
from ingest.analyse import analyse_run
from ingest.models import Call, RawBatch, Run
from ingest.store import process_batch
from tests import services
from tests.fuzz import strategies
from tests.fuzz.conftest import CASES, bounded, budget
from tests.fuzz.test_otlp import receive

pytestmark = [
    pytest.mark.services,
    pytest.mark.django_db,
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]


@pytest.fixture
def postgresql(db):
    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (NUL, surrogates and number ranges are its limits)")


def with_valid_ids(message, signal: str):
    """Every span (or record) given fresh valid ids, so it is accepted and the rest of it is tested."""
    records = (
        [span for rs in message.resource_spans for ss in rs.scope_spans for span in ss.spans]
        if signal == otlp.TRACES
        else [record for rl in message.resource_logs for sl in rl.scope_logs for record in sl.log_records]
    )
    trace_id = os.urandom(16)
    for record in records:
        record.trace_id, record.span_id = trace_id, os.urandom(8)
        if signal == otlp.TRACES and record.parent_span_id:
            record.parent_span_id = os.urandom(8)
        if signal == otlp.LOGS:
            record.time_unix_nano = record.time_unix_nano or 1
    return message


def store(project, signal: str, stored: bytes, accepted: int) -> RawBatch:
    return RawBatch.objects.create(
        project=project,
        signal=signal,
        body=zlib.compress(stored, 1),
        content_type=otlp.PROTOBUF,
        wire_bytes=len(stored),
        item_count=accepted,
    )


@budget(40, deadline_ms=30_000, deep=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_hostile_request_is_stored_and_analysed(postgresql, project, data):
    CASES["store: hostile requests into PostgreSQL, processed and analysed"] += 1
    batches = []
    for signal in data.draw(st.lists(st.sampled_from([otlp.LOGS, otlp.TRACES]), min_size=1, max_size=2)):
        request = data.draw(
            strategies.trace_requests() if signal == otlp.TRACES else strategies.logs_requests()
        )
        stored = receive(signal, with_valid_ids(request, signal).SerializeToString(), "", otlp.PROTOBUF)
        if stored is not None:
            batches.append(store(project, signal, stored, 1))
    with bounded(60):
        for batch in batches:
            assert process_batch(batch.id) == "done", RawBatch.objects.get(id=batch.id).error
        for run in Run.objects.filter(project=project):
            analyse_run(run.id)
    for run in Run.objects.filter(project=project):
        assert run.analysed_seq == run.call_count == Call.objects.filter(run=run, seq__isnull=False).count()


@pytest.mark.parametrize(
    "key", ["gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.output.messages"]
)
def test_each_nasty_string_is_stored_and_analysed(postgresql, project, key):
    request = strategies.request_with_attribute(otlp.TRACES, key, text="")
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.add(key="gen_ai.conversation.id").value.string_value = "nasty"
    template = span.SerializeToString()
    scope = request.resource_spans[0].scope_spans[0]
    del scope.spans[:]
    for number, text in enumerate(strategies.NASTY_STRINGS + [f"[{t}]" for t in strategies.NASTY_STRINGS], 1):
        CASES["store: nasty strings into PostgreSQL"] += 1
        added = scope.spans.add()
        added.ParseFromString(template)
        added.span_id = number.to_bytes(8, "big")
        added.start_time_unix_nano = number
        added.attributes[1].value.string_value = text
    stored = receive(otlp.TRACES, request.SerializeToString(), "", otlp.PROTOBUF)
    batch = store(project, otlp.TRACES, stored, len(scope.spans))
    assert process_batch(batch.id) == "done", RawBatch.objects.get(id=batch.id).error
    run = Run.objects.get(project=project, key="nasty")
    analyse_run(run.id)
    run.refresh_from_db()
    assert run.analysed_seq == run.call_count == len(scope.spans)
