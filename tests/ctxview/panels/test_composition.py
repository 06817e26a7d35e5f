from ctxview.panels import composition
from tests.ctxview.panels.rows import buckets, series_row


def rows():
    # Turn 1: calls 1-2, turn 2: call 3 (bigger), turn 3: call 4 not analysed yet.
    out = [series_row(1, 1), series_row(2, 1, read=100), series_row(3, 2, read=400, write=50)]
    out.append(series_row(4, 3) | {"buckets": None})
    return out


def test_per_turn_uses_the_last_analysed_call_of_each_turn():
    result = composition.composition(rows(), "turn", "/runs/7/explain?turn=")
    assert result["x"] == [1, 2]
    assert result["seq"] == [2, 3]
    assert result["links"] == ["/runs/7/explain?turn=1", "/runs/7/explain?turn=2"]
    assert (result["calls"], result["analysed"]) == (4, 3)
    assert set(result["parts"]) == {"system", "conversation"}  # empty buckets are left out


def test_per_call_links_to_each_call():
    result = composition.composition(rows(), "call", "")
    assert result["x"] == [1, 2, 3]
    assert result["links"] == ["/calls/1001/", "/calls/1002/", "/calls/1003/"]


def test_the_figure_stacks_buckets_and_draws_the_limit_and_reserved_output():
    result = composition.composition(rows(), "turn", "/e?turn=")
    figure = composition.figure(result)
    names = [trace["name"] for trace in figure["data"]]
    assert names == ["system", "conversation", "limit − reserved output", "reserved output"]
    assert all(trace.get("stackgroup") == "window" for trace in figure["data"][:2])
    assert figure["data"][2]["y"] == [192_000, 192_000]
    assert figure["data"][3]["y"] == [200_000, 200_000] and figure["data"][3]["fill"] == "tonexty"
    # A window far below the limit: the axis fits the window and says where the budget is.
    assert figure["layout"]["yaxis"]["range"][1] < 200_000
    note = figure["layout"]["annotations"][0]
    assert "off the scale" in note["text"]
    assert (note["x"], note["xanchor"]) == (0, "left")  # clear of the toolbar, which takes the top right
    assert "range" not in composition.figure(result, scale="budget")["layout"]["yaxis"]
    assert figure["links"] == {"x": [1, 2], "prefix": "/e?turn=", "suffix": "", "ids": ["1", "2"]}


def test_long_runs_are_binned_to_the_largest_window_of_each_bin(monkeypatch):
    monkeypatch.setattr(composition, "MAX_POINTS", 10)
    many = [series_row(seq, seq, write=seq * 10) for seq in range(1, 101)]
    result = composition.composition(many, "call", "")
    assert result["points"] == 10
    assert result["seq"] == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]


def test_calls_without_a_budget_draw_no_limit_lines():
    plain = [series_row(1, 1) | {"budget": None}]
    figure = composition.figure(composition.composition(plain, "turn", ""))
    assert [trace["name"] for trace in figure["data"]] == ["system", "conversation"]


def test_a_run_with_nothing_analysed_has_no_points():
    result = composition.composition([series_row(1, 1) | {"buckets": None}], "turn", "")
    assert (result["points"], result["peak"]) == (0, 0)


def test_estimated_buckets_are_reported():
    row = series_row(1, 1)
    row["buckets"] = buckets(system=10) | {"estimated": True}
    assert composition.composition([row], "call", "")["estimated"] is True


def test_a_run_with_few_turns_opens_per_call_and_a_long_conversation_per_turn():
    panel = composition.CompositionPanel()
    params = panel.params({})
    few = [series_row(seq, 1 + seq // 40) for seq in range(1, 81)]  # 80 calls in 3 turns
    assert panel.compute({"rows": few, "explain_base": "/x?turn="}, params)["by"] == "call"
    many = [series_row(turn, turn) for turn in range(1, 41)]
    assert panel.compute({"rows": many, "explain_base": "/x?turn="}, params)["by"] == "turn"
    asked = panel.params({"by": "turn"})
    assert panel.compute({"rows": few, "explain_base": "/x?turn="}, asked)["by"] == "turn"


def test_a_short_run_gets_whole_number_ticks_and_no_empty_band_before_the_first_turn():
    rows = [series_row(seq, seq) for seq in (1, 2, 3)]
    layout = composition.figure(composition.composition(rows, "turn", "/x?turn="))["layout"]
    axis = layout["xaxis"]
    assert (axis["tickmode"], axis["tick0"], axis["dtick"]) == ("linear", 1, 1)
    assert axis["range"] == [0.5, 3.5]
