import pytest

from ctxview.panels import cache
from ctxview.params import BadParameter
from tests.ctxview.panels.rows import series_row


def test_bars_hit_rate_and_breaks_per_call():
    rows = [series_row(1, 1), series_row(2, 1, read=900, write=0, uncached=100), series_row(3, 2, broke=True)]
    result = cache.cache_series(rows)
    assert result["x"] == [1, 2, 3]
    assert result["cache_read"] == [0, 900, 0]
    assert result["hit_rate"] == [0.0, 0.9, 0.0]
    assert [entry["seq"] for entry in result["breaks"]] == [3]
    assert result["breaks"][0]["cause_help"].startswith("earlier history")
    assert result["urls"] == ["/calls/1001/", "/calls/1002/", "/calls/1003/"]


def test_unknown_figures_stay_unknown():
    row = series_row(1, 1) | {"cache_read": None, "cache_write": None, "prompt_total": None}
    result = cache.cache_series([row])
    assert (result["cache_read"], result["hit_rate"], result["reported"]) == ([None], [None], 0)


def test_the_figure_marks_each_break_clickably_above_the_bars():
    rows = [series_row(1, 1), series_row(2, 1, broke=True)]
    figure = cache.figure(cache.cache_series(rows))
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["uncached", "cache write", "cache read", "expected read", "hit rate", "cache break"]
    marker = figure["data"][-1]
    assert marker["customdata"] == ["/calls/1002/"] and marker["yaxis"] == "y2"
    assert marker["y"] == [cache.BREAK_ROW] and cache.BREAK_ROW > 1
    # Trace text is escaped for plotly's pseudo-HTML.
    assert "msg:&lt;b&gt;x&lt;/b&gt;" in marker["hovertext"][0]
    assert figure["layout"]["barmode"] == "stack"
    assert figure["links"] == {"x": [1, 2], "prefix": "/calls/100", "suffix": "/", "ids": ["1", "2"]}
    assert figure["data"][0]["hovertemplate"].startswith("call %{x}")


def test_long_runs_sum_bars_per_bin_but_keep_every_break(monkeypatch):
    monkeypatch.setattr(cache, "MAX_BARS", 10)
    rows = [series_row(seq, seq, broke=seq % 7 == 0) for seq in range(1, 26)]
    result = cache.cache_series(rows)
    assert result["bin"] == 3 and len(result["x"]) == 9
    assert result["cache_write"][0] == 300 and result["labels"][0] == "calls 1–3"
    assert [entry["seq"] for entry in result["breaks"]] == [7, 14, 21]


def a_break(seq: int, cause: str, tokens: int, cost: float | None) -> dict:
    row = series_row(seq, 1, broke=True)
    row["cache"] |= {"cause": cause, "tokens_rewritten": tokens, "cost_usd": cost}
    return row


def test_breaks_by_cause_sum_count_tokens_and_cost_with_the_first_and_last_call_and_the_fix():
    rows = [
        a_break(2, "key_order", 100, 0.5),
        a_break(3, "history_rewritten", 40, 0.25),
        a_break(5, "key_order", 300, 0.25),
        a_break(7, "history_rewritten", 60, None),
    ]
    groups = cache.by_cause(cache.cache_series(rows)["breaks"])
    assert [group["cause"] for group in groups] == ["key_order", "history_rewritten"]
    key_order = groups[0]
    assert (key_order["count"], key_order["tokens_rewritten"], key_order["cost_usd"]) == (2, 400, 0.75)
    assert (key_order["first"]["seq"], key_order["last"]["seq"]) == (2, 5)
    assert key_order["fix"].startswith("Serialise JSON with a fixed key order")
    assert groups[1]["cost_usd"] == 0.25  # a break without a price adds tokens, not a made-up cost


def test_the_verdict_says_whether_caching_paid_off():
    assert cache.verdict({"with_cache": 1.46, "without_cache": 1.36})["pays"] is False
    paid = cache.verdict({"with_cache": 0.9, "without_cache": 1.7})
    assert paid["pays"] and paid["saved"] == 0.8
    assert cache.verdict({"with_cache": None, "without_cache": None}) is None
    assert cache.verdict(None) is None


def test_every_break_is_reachable_through_the_pages():
    breaks = list(range(1, 2 * cache.BREAKS_PER_PAGE + 6))
    pages = [cache.page_of(breaks, page) for page in (1, 2, 3)]
    assert [entry for page in pages for entry in page["rows"]] == breaks
    assert (pages[0]["previous"], pages[0]["next"], pages[2]["next"]) == (None, 2, None)
    with pytest.raises(BadParameter, match="breaks_page 4 does not exist: the breaks of this run fill 3 pag"):
        cache.page_of(breaks, 4)
    empty = cache.page_of([], 1)
    assert (empty["rows"], empty["pages"], empty["next"]) == ([], 1, None)


def test_the_panel_pages_its_breaks_from_the_query():
    panel = cache.CachePanel()
    rows = [a_break(seq, "key_order", 10, 0.01) for seq in range(1, cache.BREAKS_PER_PAGE + 3)]
    result = panel.compute({"rows": rows, "cost": None}, panel.params({"breaks_page": "2"}))
    assert [entry["seq"] for entry in result["breaks_page"]["rows"]] == [51, 52]
    assert result["by_cause"][0]["count"] == len(rows)


def test_a_run_without_a_break_says_reused_only_where_calls_read_from_the_cache():
    never = cache.cache_series([series_row(1, 1), series_row(2, 1)])  # each read 0
    some = cache.cache_series([series_row(1, 1), series_row(2, 1, read=900)])
    every = cache.cache_series([series_row(1, 1, read=50), series_row(2, 1, read=900)])
    assert "no call read anything" in cache.no_break_note(never)
    assert "reused" not in cache.no_break_note(never)
    assert cache.no_break_note(some).startswith("No cache break found; 1 call of 2 read nothing")
    assert cache.no_break_note(every) == "No cache break: every call read from the cache."
