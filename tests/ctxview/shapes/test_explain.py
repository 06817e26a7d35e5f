from ctxview.shapes import explain
from tests.ctxview.panels.rows import buckets, item, series_row


def call(seq, turn, items, excluded=(), conflicts=(), parts=None, source="explicit"):
    return {
        "id": 100 + seq,
        "seq": seq,
        "turn": turn,
        "items": items,
        "excluded": list(excluded),
        "budget": {"limit": 1000, "reserved_output": 100},
        "analysis": {"buckets": buckets(**(parts or {"conversation": 10})), "conflicts": list(conflicts)},
        "manifest_source": source,
    }


def stored(items):
    return [{key: value for key, value in entry.items() if key != "position"} for entry in items]


def build():
    rule = item("rule:keep", 0, pinned=True, kind="rule", bucket="memory", tokens=10)
    fact = item("fact:shard", 1, kind="fact", tokens=5)
    first = call(1, 1, [rule, fact, item("m1", 2)], parts={"memory": 10, "conversation": 15})
    second = call(2, 2, [rule, fact, item("m1", 2), item("m2", 3)], parts={"memory": 10, "conversation": 25})
    # Turn 3: the fact and m1 slide out; the pinned rule ends up in the middle; a conflict appears.
    conflict = {
        "type": "conflicting_versions",
        "source": "a.ts",
        "versions": ["v1", "v2"],
        "item_ids": ["f1", "f2"],
    }
    third_items = [
        item("big1", 0, tokens=100),
        item("rule:keep", 1, pinned=True, kind="rule", bucket="memory", tokens=10),
        item("m2", 2),
        item("m3", 3, tokens=100),
    ]
    third = call(
        3,
        3,
        third_items,
        excluded=[{"id": "fact:shard", "reason": "sliding_window"}, {"id": "m1", "reason": "sliding_window"}],
        conflicts=[conflict],
        parts={"memory": 10, "conversation": 210},
    )
    history = explain.history(
        (c["seq"], c["turn"], stored(c["items"]), c["excluded"], c["manifest_source"])
        for c in (first, second, third)
    )
    return first, second, third, history


def test_a_fact_that_slid_out_is_named_with_when_and_why():
    first, second, third, history = build()
    turn_calls = [series_row(3, 3, broke=True)]
    findings = [{"type": "fact_dropped", "severity": "warning", "call_seq": 3, "item_id": "fact:shard"}]
    result = explain.explain(third, second, first, history, turn_calls, findings, "/i?id=")
    [fact] = result["gone_important"]
    assert (fact["id"], fact["left_seq"], fact["left_turn"], fact["reason"]) == (
        "fact:shard",
        3,
        3,
        "sliding_window",
    )
    assert fact["url"] == "/i?id=fact%3Ashard"
    assert result["gone_groups"][0]["reason"] == "sliding_window" and result["gone_groups"][0]["count"] == 1
    assert [entry["id"] for entry in result["gone_previous"]] == ["fact:shard", "m1"]
    assert [entry["id"] for entry in result["new_items"]] == ["big1", "m3"]
    assert "fact:shard (left at turn 3: sliding_window)" in result["headlines"][0]


def test_pinned_items_in_the_middle_conflicts_buckets_and_cache():
    first, second, third, history = build()
    result = explain.explain(third, second, first, history, [series_row(3, 3, broke=True)], [], "/i?id=")
    assert result["pinned_middle"] == [
        {"id": "rule:keep", "share": 0.477, "moved": True, "url": "/i?id=rule%3Akeep"}
    ]
    assert [conflict["new"] for conflict in result["conflicts"]] == [True]
    conversation = next(row for row in result["buckets"] if row["bucket"] == "conversation")
    assert (conversation["start"], conversation["previous"], conversation["now"]) == (15, 25, 210)
    assert (conversation["delta_previous"], conversation["delta_start"]) == (185, 195)
    assert result["cache"][0]["broke"] and result["cache"][0]["cause"] == "history_rewritten"
    assert any("moved into the middle" in line for line in result["headlines"])
    assert any("new conflict" in line for line in result["headlines"])


def test_a_derived_manifest_says_it_cannot_know_why():
    first = call(1, 1, [item("a", 0)], source="derived")
    second = call(2, 2, [item("b", 0)], source="derived")
    history = explain.history(
        [(1, 1, stored(first["items"]), [], "derived"), (2, 2, stored(second["items"]), [], "derived")]
    )
    result = explain.explain(second, first, first, history, [], [], "")
    assert result["gone_previous"][0]["reason"].startswith("unknown (derived manifest")


def test_the_first_turn_has_nothing_before_it():
    first = call(1, 1, [item("a", 0)])
    history = explain.history([(1, 1, stored(first["items"]), [], "explicit")])
    result = explain.explain(first, None, first, history, [], [], "")
    assert result["gone_previous"] == [] and result["gone_total"] == 0
    assert result["headlines"] == ["Nothing notable changed in the window since the turn before."]


def test_conflicts_about_the_same_items_are_one_subject():
    conflicts = [
        {"type": "conflicting_versions", "source": "plan.md", "item_ids": ["plan@v1", "plan@v2"]},
        {"type": "superseded_included", "item_id": "plan@v1", "superseded_by": "plan@v2"},
        {"type": "stale_version", "source": "plan.md", "item_id": "plan@v1"},
        {"type": "superseded_included", "item_id": "notes@v1", "superseded_by": "notes@v2"},
    ]
    subjects = explain.conflict_subjects(conflicts)
    assert [subject["name"] for subject in subjects] == ["plan.md", "notes@v1"]
    assert subjects[0]["items"] == ["plan@v1", "plan@v2"]
    assert subjects[0]["types"] == ["conflicting_versions", "superseded_included", "stale_version"]
