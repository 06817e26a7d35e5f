"""What the threshold kinds read, against a recomputation in Python from every roll-up row: the window's
figures (summed in the database, breaks read only from the rows that hold one), the baseline kept on the
monitor across ticks and hours, the costliest run, and a first-seen episode's clean calls."""

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxview.models import Monitor
from ctxview.monitors import kinds
from ingest.models import Run
from ingest.rollups import Rollup, empty, merge
from tests import factories

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
MODELS = ("m1", "m2")


def _runs(project, count: int) -> list[Run]:
    return [
        Run.objects.create(project=project, key=f"run-{number}", key_source="test", service_name="svc")
        for number in range(count)
    ]


def fill(project, runs: list[Run], seed: int, minutes: int) -> list[Rollup]:
    """One roll-up row per run and minute over ``minutes`` minutes before T0 (some minutes skipped), some
    with a break."""
    rng, rows = random.Random(seed), []
    for run in runs:
        for offset in range(0, minutes, rng.randint(1, 97)):
            calls = rng.randint(1, 4)
            prompt = rng.randint(1_000, 9_000) * calls
            broke = rng.random() < 0.2
            rows.append(
                Rollup(
                    project=project,
                    run=run,
                    segment=0,
                    minute=T0 - timedelta(minutes=offset),
                    service="svc",
                    model=rng.choice(MODELS),
                    calls=calls,
                    prompt_calls=calls,
                    billed_input=prompt,
                    hit_calls=calls,
                    hit_prompt=prompt,
                    hit_read=rng.randint(0, prompt),
                    priced_calls=calls,
                    cost_usd=prompt * 3e-6,
                    first_ns=int((T0 - timedelta(minutes=offset)).timestamp() * 1e9),
                    max_input=prompt,
                    peak_window=prompt,
                    peak_seq=1,
                    breaks=(
                        {
                            "tools_changed": {
                                "n": 1,
                                "tokens": prompt,
                                "cost": prompt * 3.75e-6,
                                "last_at": 0,
                                "first": {
                                    "seq": offset,
                                    "at": offset,
                                    "item": f"tool:{offset}",
                                    "kind": "tool",
                                },
                            }
                        }
                        if broke
                        else {}
                    ),
                )
            )
    return Rollup.objects.bulk_create(rows)


def direct(rows: list[Rollup], since: datetime, until: datetime, model: str = "") -> dict:
    """The rows of ``(since, until]`` (of ``model``, if given) added up in Python, one by one."""
    total = empty()
    for row in rows:
        if since < row.minute <= until and (not model or row.model == model):
            merge(total, {name: getattr(row, name) for name in empty()})
    return total


def monitor_of(project, kind: str, params: dict, **scope) -> Monitor:
    name = f"{kind}-{Monitor.objects.count()}"
    return Monitor.objects.create(project=project, name=name, kind=kind, params=params, **scope)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10**6),
    ticks=st.lists(st.integers(-3 * 24 * 60, 0), min_size=1, max_size=6),
    days=st.integers(1, 3),
    model=st.sampled_from(["", *MODELS]),
)
def test_the_kept_baseline_equals_the_sum_of_its_rows_at_every_tick(seed, ticks, days, model):
    project, _ = factories.project_with_key(f"b{seed}-{Run.objects.count()}")
    rows = fill(project, _runs(project, 3), seed, minutes=5 * 24 * 60)
    monitor = monitor_of(project, "hit_rate_drop", {"drop_points": 10, "baseline_days": days}, model=model)
    # Ticks in any order, the kept sums carried from each to the next (a step back in time too).
    for offset in ticks:
        start = T0 + timedelta(minutes=offset)
        found = kinds.baseline(monitor, start)
        expected = direct(rows, start - timedelta(days=days), start, model)
        assert found["hit_prompt"] == expected["hit_prompt"]
        assert found["hit_read"] == expected["hit_read"]
        assert found["cost_usd"] == pytest.approx(expected["cost_usd"], rel=1e-9, abs=1e-9)
        assert monitor.baseline["key"].startswith(start.replace(minute=0).isoformat())


def test_the_baseline_is_summed_over_its_days_once_an_hour(django_assert_num_queries):
    project, _ = factories.project_with_key("hourly")
    fill(project, _runs(project, 2), 7, minutes=2 * 24 * 60)
    monitor = monitor_of(project, "cost_spike", {"times_baseline": 2, "baseline_days": 1})
    with django_assert_num_queries(3):  # the whole hours, the minutes since, the minutes left behind
        kinds.baseline(monitor, T0 - timedelta(minutes=50))
    for minutes in (49, 30, 1):  # the same hour: the kept sums and two reads of under an hour of rows
        with django_assert_num_queries(2):
            kinds.baseline(monitor, T0 - timedelta(minutes=minutes))
    with django_assert_num_queries(3):
        kinds.baseline(monitor, T0)
    monitor.model = "m1"  # another scope: summed again
    with django_assert_num_queries(3):
        kinds.baseline(monitor, T0)


def test_the_window_figures_equal_a_recomputation(db):
    project, _ = factories.project_with_key("window")
    rows = fill(project, _runs(project, 4), 11, minutes=240)
    monitor = monitor_of(project, "cost_spike", {"above_usd": 1e9, "per": "run", "window_minutes": 120})
    total = kinds.tally(kinds.window(monitor, T0, 120))
    expected = direct(rows, T0 - timedelta(minutes=120), T0)
    for name in ("calls", "billed_input", "hit_prompt", "hit_read", "max_input", "peak_window"):
        assert total[name] == expected[name], name
    assert total["cost_usd"] == pytest.approx(expected["cost_usd"])
    [(cause, entry)] = total["breaks"].items()
    mine = expected["breaks"][cause]
    assert (entry["n"], entry["tokens"]) == (mine["n"], mine["tokens"])
    assert entry["first"]["item"] == mine["first"]["item"]
    # The costliest run of the window, from a GROUP BY.
    by_run: dict[int, float] = {}
    for row in rows:
        if T0 - timedelta(minutes=120) < row.minute <= T0:
            by_run[row.run_id] = by_run.get(row.run_id, 0.0) + row.cost_usd
    verdict = kinds.cost_spike(monitor, T0)
    assert verdict.cause["costliest_run"] == max(by_run, key=by_run.get)
    assert verdict.evidence["run_cost_usd"] == round(max(by_run.values()), 6)


def test_an_empty_window_has_unknown_peaks_not_zero(db):
    project, _ = factories.project_with_key("empty")
    monitor = monitor_of(project, "cost_spike", {"above_usd": 1})
    total = kinds.tally(kinds.window(monitor, T0, 60))
    assert (total["calls"], total["max_input"], total["peak_window"], total["breaks"]) == (0, None, None, {})
    assert kinds.figures(total)["hit_rate"] is None


def test_a_drop_against_the_baseline_fires_and_names_the_break(db):
    project, _ = factories.project_with_key("drop")
    [run] = _runs(project, 1)

    def row(minutes_before: int, read_share: float, breaks: dict | None = None) -> Rollup:
        return Rollup(
            project=project,
            run=run,
            segment=0,
            minute=T0 - timedelta(minutes=minutes_before),
            calls=2,
            hit_calls=2,
            hit_prompt=10_000,
            hit_read=int(10_000 * read_share),
            breaks=breaks or {},
        )

    broke = {"n": 1, "tokens": 9_000, "cost": 0.03, "last_at": 1, "first": {"seq": 7, "item": "system"}}
    # A day of 90% hits, then the last 30 minutes at 20%, with a break of the system prompt.
    Rollup.objects.bulk_create(
        [row(minutes, 0.9) for minutes in range(31, 24 * 60, 10)]
        + [
            row(minutes, 0.2, {"volatile_system_prompt": broke} if minutes == 25 else None)
            for minutes in range(0, 30, 5)
        ]
    )
    monitor = monitor_of(project, "hit_rate_drop", {"drop_points": 50, "baseline_days": 1})
    verdict = kinds.hit_rate_drop(monitor, T0)
    assert verdict.firing
    assert (verdict.evidence["hit_rate"], verdict.evidence["baseline_hit_rate"]) == (0.2, 0.9)
    assert (verdict.cause["name"], verdict.cause["item"], verdict.cause["seq"]) == (
        "volatile_system_prompt",
        "system",
        7,
    )
    assert not kinds.hit_rate_drop(
        monitor_of(project, "hit_rate_drop", {"drop_points": 80}, model="x"), T0
    ).firing


def test_a_window_above_a_share_of_its_stated_limit_fires_and_unknown_limits_never_do(db):
    project, _ = factories.project_with_key("share")
    stated, unstated = _runs(project, 2)
    common = {"project": project, "segment": 0, "calls": 1}
    Rollup.objects.bulk_create(
        [
            # The largest window in tokens states no limit; the other is 90 % of its limit.
            Rollup(run=unstated, minute=T0 - timedelta(minutes=3), peak_window=500_000, peak_seq=4, **common),
            Rollup(
                run=stated,
                minute=T0 - timedelta(minutes=2),
                peak_window=180_000,
                peak_seq=9,
                peak_share=0.9,
                share_seq=9,
                **common,
            ),
        ]
    )
    verdict = kinds.window_size(monitor_of(project, "window_size", {"above_percent": 80}), T0)
    assert verdict.firing
    assert (verdict.cause["run"], verdict.cause["seq"]) == (stated.id, 9)
    assert verdict.evidence == {"peak_window": 500_000, "peak_percent_of_limit": 90.0}
    assert not kinds.window_size(
        monitor_of(project, "window_size", {"above_percent": 95}, model="x"), T0
    ).firing
    # Only the call without a stated limit in the window: its share is unknown, and nothing fires.
    quiet = kinds.window_size(
        monitor_of(project, "window_size", {"above_percent": 1}), T0 - timedelta(minutes=3)
    )
    assert (quiet.firing, quiet.evidence["peak_percent_of_limit"]) == (False, None)
