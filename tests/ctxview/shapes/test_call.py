from ctxview.shapes import call
from tests.ctxview.panels.rows import buckets, item


def test_the_gauge_scales_the_budget_and_the_window():
    gauge = call.gauge(buckets(system=1000, conversation=3000), {"limit": 10_000, "reserved_output": 2000})
    assert [part["bucket"] for part in gauge["window"]] == ["system", "conversation"]
    assert gauge["window"][1]["x"] == 250.0 and gauge["window"][1]["width"] == 750.0
    assert gauge["budget"][1]["width"] == 300.0
    assert (gauge["reserved_x"], gauge["reserved_width"], gauge["limit_x"]) == (800.0, 200.0, 1000.0)
    assert (gauge["status"], gauge["free"], gauge["used_share"]) == ("ok", 4000, 0.4)


def test_the_gauge_says_when_the_window_is_over_or_squeezed():
    assert (
        call.gauge(buckets(conversation=9000), {"limit": 10_000, "reserved_output": 2000})["status"]
        == "squeezed"
    )
    over = call.gauge(buckets(conversation=12_000), {"limit": 10_000, "reserved_output": 0})
    assert over["status"] == "over" and over["limit_x"] < 1000
    assert "budget" not in call.gauge(buckets(conversation=5), None)
    assert call.gauge(None, None) is None


def test_item_rows_mark_the_cache_boundary_the_invalidator_and_pinned_items_in_the_middle():
    items = [
        item("a", 0, tokens=40),
        item("b", 1, tokens=10),
        item("c", 2, tokens=10, pinned=True),
        item("d", 3, tokens=40),
    ]
    cache = {"reusable_items": 1, "invalidator_item_id": "b", "detail": {"position": 1}}
    findings = [{"type": "lost_in_middle", "item_id": "c"}]
    table = call.item_rows(items, cache, findings)
    rows = table["rows"]
    assert table["boundary"] == 1 and table["by_tokens"]
    assert [row["share"] for row in rows] == [0.0, 0.4, 0.5, 0.6]
    assert [row["cached"] for row in rows] == [True, False, False, False]
    assert [row["invalidator"] for row in rows] == [False, True, False, False]
    assert rows[2]["in_middle"] and rows[2]["findings"] == ["lost_in_middle"]


def test_unknown_token_counts_fall_back_to_positions():
    table = call.item_rows([item("a", 0, tokens=None), item("b", 1, tokens=None)], None)
    assert [row["share"] for row in table["rows"]] == [0.0, 0.5]
    assert table["boundary"] is None and not table["tokens_known"]


def test_the_prefix_strip_merges_long_chains_but_keeps_the_invalidator_visible(monkeypatch):
    monkeypatch.setattr(call, "STRIP_ITEMS", 5)
    items = [item(f"i{n}", n, tokens=100) for n in range(20)]
    items[10]["tokens"] = 1
    cache = {
        "reusable_items": 10,
        "invalidator_item_id": "i10",
        "detail": {"position": 10},
        "cause": "key_order",
    }
    strip = call.prefix_strip(call.item_rows(items, cache)["rows"], cache)
    assert [cell["state"] for cell in strip["cells"]] == ["cached", "invalidator", "fresh"]
    assert strip["cells"][1]["width"] >= 9  # at least 1 % of the strip
    assert strip["cells"][0]["count"] == 10 and strip["cause_help"].startswith("the same JSON")
    assert 0 < strip["boundary_x"] < 1000


def test_neighbours_give_previous_and_next_call_and_turn():
    rows = [(1, 1, 11), (2, 1, 12), (3, 2, 13), (4, 2, 14), (5, 3, 15)]
    around = call.neighbours(rows, 4)
    assert around["previous"] == (3, 2, 13) and around["next"] == (5, 3, 15)
    assert around["previous_turn"] == (1, 1, 11) and around["next_turn"] == (5, 3, 15)
    first = call.neighbours(rows, 1)
    assert first["previous"] is None and first["previous_turn"] is None and first["next_turn"] == (3, 2, 13)


def test_a_break_between_two_versions_of_one_item_is_diffable_and_other_items_are_not():
    system_old, system_new = item("system:prompt", 0), item("system:prompt", 0)
    assert call.diffable("history_rewritten", system_old, system_new)
    assert call.diffable("volatile_system_prompt", item("system:a", 0), item("system:b", 0))
    assert not call.diffable("history_rewritten", item("msg:t1:user", 3), item("msg:t2:user", 3))
    assert not call.diffable("history_rewritten", item("msg:t1:user", 3), None)


def test_the_rewrite_story_lists_the_removed_items_with_their_reason_and_the_inserted_ones():
    old = [item(name, index) for index, name in enumerate(["sys", "m1", "a1", "m2", "a2"])]
    new = [item(name, index) for index, name in enumerate(["sys", "m2", "a2", "m3"])]
    story = call.rewrite_story(old, new, 1, {"m1": "sliding_window", "a1": "sliding_window"})
    assert [entry["id"] for entry in story["removed"]] == ["m1", "a1"]
    assert story["removed_reasons"] == [("sliding_window", 2)]
    assert [entry["id"] for entry in story["inserted"]] == ["m3"]
    assert (story["written_again"], story["truncated"]) == (len(new) - 1, False)


def test_the_rewrite_story_names_a_few_items_and_counts_the_rest():
    count = call.STORY_ITEMS + 5
    old = [item(f"m{index}", index) for index in range(count)]
    story = call.rewrite_story(old, [], 0, {})
    assert len(story["removed"]) == call.STORY_ITEMS and story["removed_more"] == 5
    assert story["removed_reasons"] == [("no reason given", count)] and story["truncated"]
