"""The run overview's KPI strip and live status, from the run's totals and accounting (plain data)."""

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from ctxview.shapes import words

# A run that received a call this recently is taken as still running: its page polls for more.
LIVE_FOR = timedelta(minutes=2)


def status(call_count: int, analysed_seq: int, updated_at: datetime, now: datetime) -> str:
    """live (calls arriving), analysing (calls waiting for their analysis) or idle."""
    if analysed_seq < call_count:
        return "analysing"
    if now - updated_at < LIVE_FOR:
        return "live"
    return "idle"


def _money(value: float | None) -> str:
    return words.money(value)


def _tokens(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def _cost_value(cost: Mapping[str, Any]) -> str:
    """The run's cost; a range where some calls are priced but did not say what they read from cache."""
    bounds = cost.get("with_cache_range")
    if bounds and not cost.get("unpriced_models"):
        low, high = bounds
        return _money(low) if words.money(low) == words.money(high) else f"{_money(low)} – {_money(high)}"
    return _money(cost.get("with_cache"))


def _cost_detail(cost: Mapping[str, Any]) -> str:
    """Why the cost is what it is: the models with no price, the calls with no cache split, or the saving."""
    with_cache, without = cost.get("with_cache"), cost.get("without_cache")
    models = cost.get("unpriced_models") or []
    if models:
        return f"no price for {', '.join(models[:3])}{' and more' if len(models) > 3 else ''}"
    ranged = cost.get("ranged_calls") or 0
    if ranged:
        calls = words.counted(ranged, "call")
        return f"{calls} did not report what of the prompt was cached: the range runs from all of it to none"
    if without is None:
        unknown = cost.get("unpriced_calls") or 0
        return f"{words.counted(unknown, 'call')} did not report their token counts" if unknown else ""
    if with_cache is not None and with_cache > without:
        return f"{_money(without)} without caching: caching costs more than it saves"
    return f"{_money(without)} without caching"


def kpis(
    run: Mapping[str, Any], peak: int | None, limit: int | None, findings: Mapping[str, int]
) -> list[dict]:
    """The strip: each KPI with its value, a detail line and what it means (for the hover title)."""
    accounting = run.get("accounting") or {}
    cost = accounting.get("cost_usd") or {}
    breaks = accounting.get("cache_breaks") or {}
    hit = accounting.get("cache_hit_rate")
    ratio = accounting.get("billed_to_final_ratio")
    strip = [
        {
            "label": "Calls",
            "value": f"{run['call_count']:,}",
            "detail": f"{run['turn_count']:,} turns",
            "help": "Model requests in the run, and the user-visible turns they belong to.",
        },
        {
            "label": "Peak window",
            "value": _tokens(peak),
            "detail": f"{peak / limit:.0%} of {limit:,}" if peak is not None and limit else "no limit sent",
            "help": "The largest prompt of any call, against the model's context limit.",
        },
        {
            "label": "Billed input",
            "value": _tokens(run.get("prompt_total")),
            "detail": f"{ratio:,.1f}× the final window" if ratio else "",
            "help": "Prompt tokens billed over all calls. Many times the final window means the history "
            "was re-sent on every call.",
        },
        {
            "label": "Cache hit rate",
            "value": f"{hit:.0%}" if hit is not None else "unknown",
            "detail": f"{_tokens(accounting.get('cache_read'))} read",
            "help": "Cache reads ÷ prompt tokens, over the calls that reported cache figures.",
        },
        {
            "label": "Cost",
            "value": _cost_value(cost),
            "detail": _cost_detail(cost),
            "help": "What the calls cost at the price table's rates, as billed and as they would have "
            "been without prompt caching.",
        },
        {
            "label": "Cache breaks",
            "value": f"{breaks.get('count', 0):,}",
            "detail": f"{_money(breaks.get('cost_usd'))} written again" if breaks.get("count") else "",
            "help": "Calls that could not reuse the cache the run had built, and what writing their "
            "prefix again cost.",
        },
        {
            "label": "Findings",
            "value": f"{sum(findings.values()):,}",
            "detail": ", ".join(f"{count} {severity}" for severity, count in findings.items() if count),
            "help": "Things worth a look, by severity (see the findings timeline below).",
        },
    ]
    return strip
