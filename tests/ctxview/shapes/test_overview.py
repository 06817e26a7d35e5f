from datetime import UTC, datetime, timedelta

from ctxview.shapes import overview

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_a_run_is_analysing_live_or_idle():
    assert overview.status(10, 8, NOW, NOW) == "analysing"
    assert overview.status(10, 10, NOW - timedelta(seconds=30), NOW) == "live"
    assert overview.status(10, 10, NOW - timedelta(minutes=5), NOW) == "idle"


def test_kpis_show_unknown_figures_as_unknown():
    run = {"call_count": 3, "turn_count": 2, "prompt_total": None, "accounting": None}
    strip = {
        kpi["label"]: kpi for kpi in overview.kpis(run, None, None, {"error": 0, "warning": 0, "info": 0})
    }
    assert strip["Calls"]["value"] == "3" and strip["Calls"]["detail"] == "2 turns"
    assert strip["Peak window"]["value"] == "unknown"
    assert strip["Billed input"]["value"] == "unknown"
    assert strip["Cache hit rate"]["value"] == "unknown"
    assert strip["Cost"]["value"] == "unknown" and strip["Cost"]["detail"] == ""  # not analysed: no reason
    assert all(kpi["help"] for kpi in strip.values())


def test_kpis_from_the_accounting():
    accounting = {
        "cache_hit_rate": 0.6674,
        "cache_read": 341611,
        "billed_to_final_ratio": 101.9,
        "cost_usd": {"with_cache": 0.896454, "without_cache": 1.694856},
        "cache_breaks": {"count": 29, "cost_usd": 0.553143},
    }
    run = {"call_count": 57, "turn_count": 40, "prompt_total": 511852, "accounting": accounting}
    strip = {
        kpi["label"]: kpi
        for kpi in overview.kpis(run, 12014, 200_000, {"error": 1, "warning": 20, "info": 0})
    }
    assert strip["Peak window"]["value"] == "12,014" and strip["Peak window"]["detail"] == "6% of 200,000"
    assert strip["Billed input"]["detail"] == "101.9× the final window"
    assert strip["Cache hit rate"]["value"] == "67%"
    assert strip["Cost"]["value"] == "$0.8965" and strip["Cost"]["detail"] == "$1.69 without caching"
    assert strip["Cache breaks"]["detail"] == "$0.5531 written again"
    assert strip["Findings"]["value"] == "21" and strip["Findings"]["detail"] == "1 error, 20 warning"


def test_the_cost_kpi_says_when_caching_costs_more_than_it_saves():
    run = {"call_count": 80, "turn_count": 3, "prompt_total": 1, "accounting": {}}
    run["accounting"] = {"cost_usd": {"with_cache": 1.460399, "without_cache": 1.356564}}
    strip = {kpi["label"]: kpi for kpi in overview.kpis(run, None, None, {})}
    assert strip["Cost"]["detail"] == "$1.36 without caching: caching costs more than it saves"


def test_the_cost_kpi_names_the_real_reason_and_gives_a_range_where_the_price_is_known():
    run = {"call_count": 2, "turn_count": 2, "prompt_total": 1, "accounting": {}}
    cost = {"with_cache": None, "without_cache": None, "unpriced_calls": 2, "unpriced_models": []}
    run["accounting"] = {"cost_usd": {**cost, "ranged_calls": 2, "with_cache_range": [0.000412, 0.00131]}}
    strip = {kpi["label"]: kpi for kpi in overview.kpis(run, None, None, {})}
    assert strip["Cost"]["value"] == "$0.0004 – $0.0013"
    assert strip["Cost"]["detail"] == (
        "2 calls did not report what of the prompt was cached: the range runs from all of it to none"
    )
    run["accounting"] = {"cost_usd": {**cost, "unpriced_models": ["my-finetune"]}}
    strip = {kpi["label"]: kpi for kpi in overview.kpis(run, None, None, {})}
    assert (strip["Cost"]["value"], strip["Cost"]["detail"]) == ("unknown", "no price for my-finetune")
