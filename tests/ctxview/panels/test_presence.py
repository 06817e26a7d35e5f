import json

from ctxview.panels import presence


def manifests():
    return [
        (1, 1, [{"id": "tool:a", "bucket": "tools"}, {"id": "m1", "bucket": "conversation"}], [], "explicit"),
        (
            2,
            1,
            [
                {"id": "tool:a", "bucket": "tools"},
                {"id": "m1", "bucket": "conversation", "mode": "summary"},
                {"id": "rule", "kind": "rule", "bucket": "memory", "pinned": True},
            ],
            [{"id": "log", "reason": "budget"}],
            "explicit",
        ),
        (3, 2, [{"id": "tool:a", "bucket": "tools"}], [{"id": "m1", "reason": "sliding_window"}], "derived"),
    ]


def test_the_index_records_each_items_state_per_call():
    built = presence.index(manifests())
    assert built["seqs"] == [1, 2, 3] and built["derived"] == 1
    assert built["items"]["m1"]["states"] == {0: 1, 1: 3, 2: presence.EXCLUDED}
    assert built["items"]["m1"]["reasons"] == {2: "sliding_window"}
    assert built["items"]["log"]["bucket"] == "other" and not built["items"]["log"]["included"]
    assert built["items"]["rule"]["pinned"]


def test_rows_are_grouped_by_bucket_and_cells_say_what_happened():
    result = presence.presence(presence.index(manifests()), item_base="/runs/1/item?id=")
    assert result["labels"] == ["tool:a", "rule", "m1", "log"]
    assert [group["bucket"] for group in result["groups"]] == ["tools", "memory", "conversation", "other"]
    assert result["z"][2] == [1, 3, presence.EXCLUDED]
    assert result["cell_labels"][result["cells"][2][2]] == "excluded (sliding_window)"
    assert result["cell_labels"][result["cells"][2][1]] == "summary"
    assert result["cells"][1][0] == -1
    assert result["z"][1] == [None, 1, None]  # absent cells are gaps
    assert result["links"][0] == "/runs/1/item?id=tool%3Aa"


def test_a_thousand_call_run_is_bounded_in_rows_and_columns():
    calls = []
    for seq in range(1, 1001):
        window = [{"id": f"msg:{n}", "bucket": "conversation"} for n in range(max(1, seq - 80), seq + 1)]
        window += [{"id": "pinned", "bucket": "memory", "pinned": True}]
        gone = [{"id": f"msg:{seq - 81}", "reason": "sliding_window"}] if seq > 81 else []
        calls.append((seq, seq // 4 + 1, window, gone, "explicit"))
    built = presence.index(calls)
    assert len(built["items"]) == 1001
    result = presence.presence(built, flagged={"msg:500"})
    assert result["columns"] <= presence.MAX_COLUMNS and result["bin"] == 5
    assert result["rows"] == presence.ROWS and result["more"]
    assert all(len(row) == result["columns"] for row in result["z"])
    assert "pinned" in result["labels"] and "msg:500" in result["labels"]  # flagged and pinned first
    cells = sum(1 for row in result["z"] for cell in row if cell is not None)
    assert cells <= presence.ROWS * presence.MAX_COLUMNS
    binned = result["cell_labels"][next(index for index in result["cells"][0] if index >= 0)]
    assert binned.startswith("calls ") and " in " in binned
    assert len(result["cell_labels"]) < 5 * presence.MAX_COLUMNS  # a table of labels, not one per cell
    # What goes to the browser stays small whatever the run's length.
    assert len(json.dumps(presence.figure(result))) < 400_000


def test_the_filter_matches_ids_and_rows_can_grow():
    built = presence.index(manifests())
    assert presence.presence(built, query="TOOL")["labels"] == ["tool:a"]
    assert presence.presence(built, rows=2)["rows"] == 2
    assert presence.presence(built, query="nothing")["rows"] == 0


def test_labels_are_escaped_shortened_and_kept_apart():
    long = "x" * 60
    calls = [(1, 1, [{"id": f"{long}a"}, {"id": f"{long}b"}, {"id": "<img src=x>"}], [], "explicit")]
    labels = presence.presence(presence.index(calls))["labels"]
    assert labels[0].endswith("…") and labels[1].endswith("… (2)")
    assert labels[2] == "&lt;img src=x&gt;"


def test_the_figure_is_a_heatmap_with_row_links():
    result = presence.presence(presence.index(manifests()), item_base="/i?id=")
    figure = presence.figure(result)
    assert figure["data"][0]["type"] == "heatmap" and figure["data"][0]["hoverongaps"] is False
    assert figure["data"][0]["z"][1] == [0, 1, 0]  # gaps travel as 0; plots.js makes them null
    assert figure["cells"]["labels"] == result["cell_labels"]
    assert figure["links"]["rows"] == result["links"]
    assert len(figure["layout"]["annotations"]) == len(result["groups"])


def test_hidden_rows_are_counted_and_marked_where_they_would_sit():
    manifests = [
        (seq, seq, [{"id": f"msg:t{n}", "bucket": "conversation"} for n in range(1, seq + 1)], [], "explicit")
        for seq in range(1, 11)
    ]
    built = presence.index(manifests)
    # Rows go to the items in the last window first, by first appearance: all ten are, so 8 rows keep
    # t1-t8 and hide t9 and t10, after the last drawn row.
    result = presence.presence(built, rows=8)
    assert (result["hidden"], result["gaps"]) == (2, [{"before": 8, "count": 2}])
    figure = presence.figure(result)
    assert "⋯ 2 hidden" in [note["text"] for note in figure["layout"]["annotations"]]
    panel = presence.PresencePanel()
    computed = panel.compute(
        {"index": built, "flagged": [], "item_base": "/i?id="}, panel.params({"rows": "8"})
    )
    assert (computed["next_shows"], computed["hidden"]) == (2, 2)


def test_rows_hidden_between_drawn_rows_are_marked_between_them():
    manifests = [
        (seq, seq, [{"id": f"msg:t{n}", "bucket": "conversation"} for n in range(1, seq + 1)], [], "explicit")
        for seq in range(1, 11)
    ]
    # A finding names msg:t10, so it is drawn; t8 and t9 are left out between t7 and t10.
    result = presence.presence(presence.index(manifests), flagged=["msg:t10"], rows=8)
    assert result["labels"][-2:] == ["msg:t7", "msg:t10"]
    assert result["gaps"] == [{"before": 7, "count": 2}]


def _places(*hows):
    return [{"how": how, "item_id": "rule" if how == "verbatim" else None} for how in hows]


def test_probes_are_rows_of_their_own_above_the_items():
    probes = {
        "probes": [{"kind": "item", "value": "rule"}, {"kind": "text", "value": "<b>shard</b>"}],
        "content": "none",
        "calls": {
            1: _places("absent", "unknown"),
            2: _places("verbatim", "unknown"),
            3: _places("stub", "unknown"),
        },
    }
    result = presence.presence(presence.index(manifests()), probes=probes)
    first, second = result["probe_rows"]
    assert first["label"] == "◆ rule" and second["label"] == "◆ “&lt;b&gt;shard&lt;/b&gt;”"
    codes = presence.PROBE_CODES
    assert first["z"] == [codes["absent"], codes["verbatim"], codes["stub"]]  # absent is drawn, not a gap
    assert second["z"] == [codes["unknown"]] * 3
    assert first["text"][1] == "call 2: verbatim in rule"
    drawn = presence.figure(result)
    items, probe_trace = drawn["data"]
    assert items["y"] == result["labels"] and probe_trace["y"] == ["◆ rule", second["label"]]
    assert probe_trace["colorscale"] != items["colorscale"]
    # On an axis of their own, above the items'.
    layout = drawn["layout"]
    assert probe_trace["yaxis"] == "y2" and "yaxis" not in items
    assert layout["yaxis2"]["domain"][0] > layout["yaxis"]["domain"][1]
    labels = {note["text"]: (note["y"], note["yref"]) for note in layout["annotations"]}
    assert labels["probes"] == (0.5, "y2") and labels["tools"] == (0, "y")


def test_binned_probe_cells_say_which_calls_they_cover():
    calls = [(seq, seq, [{"id": "fact:x", "kind": "fact"}], [], "explicit") for seq in range(1, 7)]
    probes = {"probes": [{"kind": "item", "value": "fact:x"}], "content": "all",
              "calls": {seq: _places("verbatim") for seq in range(1, 7)}}  # fmt: skip
    result = presence.presence(presence.index(calls), probes=probes, max_columns=3)
    [row] = result["probe_rows"]
    assert row["text"][0] == "calls 1–2, at the last: verbatim in rule"
