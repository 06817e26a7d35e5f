from ctxview.shapes import item


def lifecycle():
    return {
        "item_id": "fact:x",
        "first_seq": 2,
        "last_seq": 5,
        "first_seen_seq": 2,
        "included": [
            {"seq": seq, "position": 3, "position_share": 0.5, "mode": mode, "version": None, "tokens": 9}
            for seq, mode in ((2, "verbatim"), (3, "verbatim"), (4, "summary"), (5, "summary"))
        ],
        "excluded": [{"seq": 6, "reason": "sliding_window"}],
        "left": [
            {"seq": 6, "reason": "sliding_window", "without_reason": False, "manifest_source": "explicit"}
        ],
    }


def test_the_story_has_turns_links_and_stretches():
    result = item.story(
        lifecycle(), {n: n // 2 for n in range(1, 7)}, {n: f"/calls/{n}/" for n in range(1, 7)}
    )
    assert [(span["first"], span["last"], span["mode"]) for span in result["spans"]] == [
        (2, 3, "verbatim"),
        (4, 5, "summary"),
    ]
    assert result["left"][0]["reason_help"].startswith("it fell out")
    assert result["included"][0]["url"] == "/calls/2/" and result["first_turn"] == 1


def test_the_figure_draws_each_mode_and_the_exclusions():
    result = item.story(lifecycle(), {}, {n: f"/calls/{n}/" for n in range(1, 7)})
    figure = item.figure(result)
    assert [trace["name"] for trace in figure["data"]] == ["verbatim", "summary", "excluded"]
    assert figure["data"][2]["customdata"] == ["/calls/6/"]
