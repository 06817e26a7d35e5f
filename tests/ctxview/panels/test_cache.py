from ctxview.panels import cache
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
