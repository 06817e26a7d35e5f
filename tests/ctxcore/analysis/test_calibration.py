"""Reported cache figures outrank our estimates: the run's calibration, and what it stops us claiming."""

import pytest

from ctxcore.analysis import calibration
from ctxcore.analysis.limits import minimum_cacheable
from tests.ctxcore.analysis.builders import analyse, call, findings_of, message, system, tool

# What the provider counts for a prefix we estimate at ``x``: another tokenizer, and a preamble before
# the tools that the trace never shows (Anthropic's tool-use system prompt).
TOKENIZER, PREAMBLE = 1.2, 340


def provider_tokens(estimate: int) -> int:
    return round(estimate * TOKENIZER) + PREAMBLE


def sums_of(pairs):
    sums = calibration.new_sums()
    for estimate, reported in pairs:
        sums = calibration.observed(sums, estimate, reported)
    return sums


def test_a_fixed_overhead_per_call_is_found_with_the_ratio():
    fit = calibration.fit(sums_of((x, provider_tokens(x)) for x in (900, 1400, 2100, 3000)))

    assert fit["calls"] == 4
    assert fit["ratio"] == pytest.approx(TOKENIZER, abs=0.001)
    assert fit["overhead"] == pytest.approx(PREAMBLE, abs=1)


def test_one_observation_gives_a_ratio_through_the_origin():
    fit = calibration.fit(sums_of([(1000, 1300)]))

    assert fit == {"ratio": 1.3, "overhead": 0, "calls": 1}
    assert calibration.calibrated(2000, fit) == 2600


def test_nothing_observed_leaves_the_estimate_as_it_is():
    assert calibration.fit(calibration.new_sums()) is None
    assert calibration.calibrated(1234, None) == 1234


@pytest.mark.parametrize(
    ("estimate", "reported"), [(0, 1800), (1800, 0), (1800, None), (1000, 3500), (3500, 1000)]
)
def test_a_call_without_both_figures_or_far_off_is_not_an_observation(estimate, reported):
    assert calibration.observed(calibration.new_sums(), estimate, reported) == calibration.new_sums()


# --- In the analysis -----------------------------------------------------------------------------

TOOLS = [tool("search_logs", 300), tool("query_metrics", 200)]


def window(seq: int) -> list[dict]:
    return [*TOOLS, system(tokens=300), *(message(n, tokens=100) for n in range(1, seq + 1))]


def growing_run(model: str = "claude-sonnet-4-5", calls: int = 6):
    """An Anthropic run whose reads are the provider's count of the prefix the previous call cached."""
    run, previous = [], None
    for seq in range(1, calls + 1):
        items = window(seq)
        estimate = sum(entry["tokens"] for entry in items)
        read = provider_tokens(previous) if previous else 0
        run.append(call(seq, items, model=model, prompt_total=provider_tokens(estimate), read=read))
        previous = estimate
    return run


def test_a_reported_read_is_never_called_below_the_minimum_nor_expected_to_be_0():
    model = "claude-sonnet-4-5"
    results, _ = analyse(growing_run(model))
    caches = [result["cache"] for result in results]

    assert caches[1]["reusable_tokens"] < minimum_cacheable(model)  # our own count is below the table
    assert findings_of(results, "cache_invalidated") == []
    assert all(cache["cause"] is None for cache in caches)
    assert all(cache["expected_read"] for cache in caches[1:])


def test_the_expected_read_is_calibrated_on_the_runs_earlier_reports():
    results, _ = analyse(growing_run())
    caches = [result["cache"] for result in results]

    assert caches[1]["calibration"] is None  # call 2 is the first to report a read
    assert caches[1]["calibration_note"]  # and its uncalibrated estimate is far from it
    assert caches[2]["calibration"] == {
        "ratio": round(caches[1]["reported_read"] / caches[1]["reusable_tokens"], 4),
        "overhead": 0,
        "calls": 1,
    }
    for cache in caches[3:]:  # two observations or more: the tokenizer's ratio and the preamble
        assert cache["calibration"]["ratio"] == pytest.approx(TOKENIZER, abs=0.001)
        assert cache["calibration"]["overhead"] == pytest.approx(PREAMBLE, abs=1)
        assert cache["expected_read"] == pytest.approx(cache["reported_read"], abs=2)
        assert cache["calibration_note"] is None


def test_a_read_without_any_estimate_stands_with_a_note_and_no_finding():
    items = [*TOOLS, system(tokens=1200), message(1)]
    results, _ = analyse([call(1, items, read=1500, agent="billing")])  # a prefix another agent cached
    cache = results[0]["cache"]

    assert (cache["expected_read"], cache["reported_read"]) == (None, 1500)
    assert "1,500" in cache["calibration_note"]
    assert results[0]["findings"] == []


def test_no_invisible_invalidator_beyond_what_the_reference_reported_caching():
    # Our count of the prefix is well above the provider's: it reported writing less than we estimate.
    items = [tool("search_logs", 3000), system(tokens=3000)]
    estimate = sum(entry["tokens"] for entry in items)
    written = estimate // 2
    calls = [
        call(1, items, prompt_total=written, read=0, write=written),
        call(2, [*items, message(2)], prompt_total=written + 200, read=written, write=0),
    ]
    results, _ = analyse(calls)

    assert results[1]["cache"]["expected_read"] == written  # never more than the provider cached
    assert results[1]["cache"]["cause"] is None
    assert findings_of(results, "invisible_invalidator") == []


def test_a_real_shortfall_is_still_an_invisible_invalidator_and_calibrates_nothing():
    run = growing_run(calls=4)
    results, state = analyse(run)
    expected = results[-1]["cache"]["expected_read"]
    estimate = sum(entry["tokens"] for entry in window(5))
    after = call(5, window(5), model=run[-1].model, prompt_total=provider_tokens(estimate), read=0)
    results, state_after = analyse([after], state)

    assert results[0]["cache"]["cause"] == "invisible"
    assert results[0]["cache"]["tokens_rewritten"] == results[0]["cache"]["expected_read"] > expected
    assert state_after["calibration"] == state["calibration"]


@pytest.mark.parametrize("model", ["claude-opus-5", "claude-mythos-5-20260301", "anthropic/claude-fable-5"])
def test_the_newest_models_cache_from_512_tokens(model):
    items = [tool("search_logs", 300), system(tokens=300, cache_breakpoint=True), message(1)]
    results, _ = analyse([call(1, items, model=model, read=0, write=0)])
    assert results[0]["cache"]["minimum"] == 512
    assert results[0]["cache"]["cause"] is None  # 600 tokens: enough for these, not for Sonnet 4.5

    results, _ = analyse([call(1, items, read=0, write=0)])
    assert results[0]["cache"]["cause"] == "below_minimum"
