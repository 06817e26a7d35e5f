"""Run accounting: billed input against the final window, cache hit rate, and cost with and without caching.

Totals are carried call by call (the state stays the same size however long the run); a figure a call did
not report is left out of the sums and counted, never taken as 0.
"""

from collections.abc import Mapping

from ctxcore.analysis import limits
from ctxcore.analysis.inputs import CallInput
from ctxcore.analysis.prices import Price
from ctxcore.vocabulary import Usage


def new_totals() -> dict:
    """The totals before a run's first call."""
    return {
        "calls": 0,
        "prompt_calls": 0,
        "billed_input": 0,
        "hit_calls": 0,
        "hit_prompt": 0,
        "hit_read": 0,
        "output_calls": 0,
        "output": 0,
        "final_window": None,
        "final_seq": None,
        "priced_calls": 0,
        "cost_with_cache": 0.0,
        "cost_without_cache": 0.0,
        "unpriced_calls": 0,
        "unpriced_models": [],
        "ranged_calls": 0,
        "cost_low": 0.0,
        "cost_high": 0.0,
        "breaks": {},
    }


def call_cost(call: CallInput, price: Price | None) -> tuple[float, float] | None:
    """USD of one call as billed (with caching) and as it would have been without; None when unknown."""
    return usage_cost(call.usage, limits.one_hour_tokens(call.usage_raw), price)


def usage_cost(usage: Usage, one_hour: int, price: Price | None) -> tuple[float, float] | None:
    """USD of these figures (one call's, or a sum of calls') as billed and without caching; None when
    unknown. ``one_hour``: the part of the cache writes that went to the 1-hour cache (its own rate)."""
    if price is None or None in (usage.uncached, usage.cache_write, usage.cache_read, usage.output):
        return None
    one_hour = min(one_hour, usage.cache_write)
    with_cache = (
        usage.uncached * price.input
        + (usage.cache_write - one_hour) * price.cache_write_5m
        + one_hour * price.cache_write_1h
        + usage.cache_read * price.cache_read
        + usage.output * price.output
    ) / 1e6
    prompt = usage.uncached + usage.cache_write + usage.cache_read
    without_cache = (prompt * price.input + usage.output * price.output) / 1e6
    return with_cache, without_cache


def usage_cost_range(usage: Usage, price: Price | None) -> tuple[float, float] | None:
    """USD bounds of a call whose prompt total and output are known but not how the prompt split between
    uncached, cache writes and cache reads (an instrumentation that reports no cache figures): the parts
    it did report at their rates, the rest at the cheapest and the dearest rate it could have been billed
    at. None when the price, the prompt total or the output is unknown."""
    if price is None or usage.prompt_total is None or usage.output is None:
        return None
    parts = (
        (usage.uncached, (price.input,)),
        (usage.cache_write, (price.cache_write_5m, price.cache_write_1h)),
        (usage.cache_read, (price.cache_read,)),
    )
    known = sum(tokens * rates[0] for tokens, rates in parts if tokens is not None)
    rest = usage.prompt_total - sum(tokens for tokens, _ in parts if tokens is not None)
    rates = [rate for tokens, options in parts if tokens is None for rate in options]
    output = usage.output * price.output
    return (
        (known + max(rest, 0) * min(rates) + output) / 1e6,
        (known + max(rest, 0) * max(rates) + output) / 1e6,
    )


def updated_totals(
    totals: Mapping, call: CallInput, window: int, price: Price | None, cache: Mapping
) -> dict:
    """The run totals after one more call."""
    usage = call.usage
    new = dict(totals)
    new["calls"] += 1
    if usage.prompt_total is not None:
        new["prompt_calls"] += 1
        new["billed_input"] += usage.prompt_total
        if usage.cache_read is not None:
            new["hit_calls"] += 1
            new["hit_prompt"] += usage.prompt_total
            new["hit_read"] += usage.cache_read
    if usage.output is not None:
        new["output_calls"] += 1
        new["output"] += usage.output
    new["final_window"] = window
    new["final_seq"] = call.seq

    cost = call_cost(call, price)
    if cost is None:
        new["unpriced_calls"] += 1
        if price is None and call.model and call.model not in new["unpriced_models"]:
            new["unpriced_models"] = sorted([*new["unpriced_models"], call.model])
        bounds = usage_cost_range(usage, price)
        if bounds is not None:
            new["ranged_calls"] += 1
            new["cost_low"] += bounds[0]
            new["cost_high"] += bounds[1]
    else:
        new["priced_calls"] += 1
        new["cost_with_cache"] += cost[0]
        new["cost_without_cache"] += cost[1]

    if cache["broke"]:
        count, tokens, dollars = new["breaks"].get(cache["cause"], (0, 0, 0.0))
        new["breaks"] = {
            **new["breaks"],
            cache["cause"]: [
                count + 1,
                tokens + cache["tokens_rewritten"],
                dollars + (cache["cost_usd"] or 0.0),
            ],
        }
    return new


def summary(totals: Mapping) -> dict:
    """The run's accounting, for the run resource."""
    billed = totals["billed_input"] if totals["prompt_calls"] else None
    final = totals["final_window"]
    priced = totals["priced_calls"] > 0
    with_cache = round(totals["cost_with_cache"], 6) if priced else None
    without_cache = round(totals["cost_without_cache"], 6) if priced else None
    breaks = totals["breaks"]
    return {
        "calls": totals["calls"],
        "billed_input": billed,
        "calls_without_prompt_total": totals["calls"] - totals["prompt_calls"],
        "final_window": final,
        "final_seq": totals["final_seq"],
        "billed_to_final_ratio": round(billed / final, 2) if billed and final else None,
        "cache_read": totals["hit_read"] if totals["hit_calls"] else None,
        "cache_hit_rate": round(totals["hit_read"] / totals["hit_prompt"], 4)
        if totals["hit_prompt"]
        else None,
        "output": totals["output"] if totals["output_calls"] else None,
        "cost_usd": {
            "with_cache": with_cache,
            "without_cache": without_cache,
            "saved": round(without_cache - with_cache, 6) if priced else None,
            "priced_calls": totals["priced_calls"],
            "unpriced_calls": totals["unpriced_calls"],
            "unpriced_models": list(totals["unpriced_models"]),
            # Calls priced but not split into cache parts: the run's cost as bounds, with the exact calls.
            "ranged_calls": totals["ranged_calls"],
            "with_cache_range": [
                round(totals["cost_with_cache"] + totals["cost_low"], 6),
                round(totals["cost_with_cache"] + totals["cost_high"], 6),
            ]
            if totals["ranged_calls"]
            else None,
        },
        "cache_breaks": {
            "count": sum(entry[0] for entry in breaks.values()),
            "tokens_rewritten": sum(entry[1] for entry in breaks.values()),
            "cost_usd": round(sum(entry[2] for entry in breaks.values()), 6),
            "by_cause": {
                cause: {"count": count, "tokens_rewritten": tokens, "cost_usd": round(dollars, 6)}
                for cause, (count, tokens, dollars) in sorted(breaks.items())
            },
        },
    }
