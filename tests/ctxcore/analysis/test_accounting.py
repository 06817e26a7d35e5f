"""Run accounting: hit rate, billed input vs the final window, cost with and without caching."""

import pytest

from ctxcore.analysis import finalise_run
from tests.ctxcore.analysis.builders import analyse, call, message, system

ITEMS = [system(tokens=2000), message(1, tokens=1000)]


def test_the_hit_rate_counts_only_calls_that_report_both_figures():
    calls = [
        call(1, ITEMS, read=0, write=3000),
        call(2, ITEMS, read=3000, write=0),
        call(3, ITEMS, prompt_total=None),
    ]
    _, state = analyse(calls)
    accounting = finalise_run(state)["accounting"]

    assert accounting["cache_hit_rate"] == 0.5
    assert accounting["cache_read"] == 3000
    assert (accounting["billed_input"], accounting["calls_without_prompt_total"]) == (6000, 1)
    assert accounting["final_window"] == 3000  # the last call's own items when its total is unknown
    assert accounting["billed_to_final_ratio"] == 2.0


def test_unknown_usage_gives_unknown_figures_never_zero():
    _, state = analyse([call(1, ITEMS, prompt_total=None)])
    accounting = finalise_run(state)["accounting"]

    assert accounting["cache_hit_rate"] is None
    assert accounting["billed_input"] is None
    assert accounting["cost_usd"]["with_cache"] is None
    assert accounting["cost_usd"]["unpriced_calls"] == 1


def test_cost_with_and_without_caching_from_the_price_table():
    calls = [call(1, ITEMS, read=0, write=3000), call(2, ITEMS, read=3000, write=0)]
    _, state = analyse(calls)
    cost = finalise_run(state)["accounting"]["cost_usd"]

    output = 2 * 100 * 15 / 1e6
    assert cost["with_cache"] == pytest.approx(3000 * 3.75 / 1e6 + 3000 * 0.30 / 1e6 + output)
    assert cost["without_cache"] == pytest.approx(6000 * 3 / 1e6 + output)
    assert cost["saved"] == pytest.approx(cost["without_cache"] - cost["with_cache"], abs=1e-6)
    assert cost["priced_calls"] == 2


def test_one_hour_writes_are_priced_at_the_one_hour_rate():
    raw = {"gen_ai.usage.cache_creation.ephemeral_1h_input_tokens": 3000}
    _, state = analyse([call(1, ITEMS, read=0, write=3000, usage_raw=raw)])
    cost = finalise_run(state)["accounting"]["cost_usd"]

    assert cost["with_cache"] == pytest.approx(3000 * 6 / 1e6 + 100 * 15 / 1e6)


def test_a_model_without_a_price_is_named():
    _, state = analyse([call(1, ITEMS, model="gemini-2.5-pro", provider="gcp.gen_ai")])
    cost = finalise_run(state)["accounting"]["cost_usd"]

    assert cost["unpriced_models"] == ["gemini-2.5-pro"]
    assert cost["with_cache"] is None


def test_cache_breaks_are_summed_by_cause():
    calls = [call(1, ITEMS), call(2, [system("Changed", tokens=2000), message(1, tokens=1000)], read=0)]
    _, state = analyse(calls)
    breaks = finalise_run(state)["accounting"]["cache_breaks"]

    assert breaks["count"] == 1
    assert breaks["tokens_rewritten"] == 3000
    assert breaks["by_cause"]["system_changed"]["cost_usd"] == pytest.approx(3000 * 3.45 / 1e6)


def test_a_priced_call_that_does_not_split_its_prompt_is_costed_as_a_range():
    # 3,000 prompt tokens reported as a total only (no cache figures), and 100 out, at Sonnet's prices.
    figures = {"uncached": None, "cache_write": None, "cache_read": None, "output": 100, "prompt_total": 3000}
    calls = [call(1, ITEMS), call(2, ITEMS, usage=figures)]
    _, state = analyse(calls)
    cost = finalise_run(state)["accounting"]["cost_usd"]

    exact = 3000 * 3.75 / 1e6 + 100 * 15 / 1e6  # the first call: all of its prompt written to the cache
    assert (cost["priced_calls"], cost["unpriced_calls"], cost["ranged_calls"]) == (1, 1, 1)
    assert cost["unpriced_models"] == []  # the model has a price: that is not why the figure is missing
    low, high = cost["with_cache_range"]
    assert low == pytest.approx(exact + 3000 * 0.30 / 1e6 + 100 * 15 / 1e6)  # all read from the cache
    assert high == pytest.approx(exact + 3000 * 6.00 / 1e6 + 100 * 15 / 1e6)  # all written for an hour


def test_no_range_where_the_price_or_the_prompt_total_is_unknown():
    unsplit = {"uncached": None, "cache_write": None, "cache_read": None, "output": 100, "prompt_total": 3000}
    _, state = analyse([call(1, ITEMS, model="my-finetune", usage=unsplit)])
    assert finalise_run(state)["accounting"]["cost_usd"]["with_cache_range"] is None
    _, state = analyse([call(1, ITEMS, prompt_total=None)])
    assert finalise_run(state)["accounting"]["cost_usd"]["with_cache_range"] is None
