from ctxview.shapes import compare
from tests.ctxview.panels.rows import buckets, item


def call(items, excluded=(), parts=None, source="explicit"):
    return {
        "items": items,
        "excluded": list(excluded),
        "analysis": {"buckets": buckets(**parts)} if parts else None,
        "manifest_source": source,
    }


def test_added_removed_changed_and_the_shared_prefix():
    a = call(
        [item("sys", 0, hash="s"), item("old", 1), item("file", 2, version="v1", hash="f1"), item("same", 3)],
        parts={"system": 10, "conversation": 30},
    )
    b = call(
        [item("sys", 0, hash="s"), item("file", 1, version="v2", hash="f2"), item("same", 2), item("new", 3)],
        excluded=[{"id": "old", "reason": "superseded"}],
        parts={"system": 10, "conversation": 45},
    )
    result = compare.compare(a, b, "/i?id=")
    assert [row["id"] for row in result["added"]] == ["new"]
    assert [(row["id"], row["reason"]) for row in result["removed"]] == [("old", "superseded")]
    assert result["removed"][0]["reason_help"] == "a newer version replaced it"
    [changed] = result["changed"]
    assert changed["fields"] == ["content", "version"] and changed["content_changed"]
    assert (changed["before"], changed["after"]) == ({"version": "v1"}, {"version": "v2"})
    assert (result["unchanged"], result["moved"], result["shared_prefix"]) == (2, 2, 1)
    assert {row["bucket"]: row["delta"] for row in result["buckets"]} == {"system": 0, "conversation": 15}
    assert result["reconciled"]


def test_without_analysis_buckets_come_from_the_items():
    a = call([item("x", 0, tokens=5)], source="derived")
    b = call([item("y", 0, tokens=7)], source="derived")
    result = compare.compare(a, b, "")
    assert result["buckets"] == [{"bucket": "conversation", "a": 5, "b": 7, "delta": 2}]
    assert result["removed"][0]["reason"] == "unknown (derived manifest)"
    assert not result["reconciled"]
