"""The life of one item across a run."""

from ctxcore.analysis import item_lifecycle
from tests.ctxcore.analysis.builders import item

FACT = item("fact-19", "memory", 40, kind="fact", version="1")
OTHER = item("m1")


def test_an_items_inclusions_exclusions_and_departures_are_listed():
    calls = [
        (1, [OTHER], [], "explicit"),
        (19, [OTHER, FACT], [], "explicit"),
        (20, [FACT, OTHER], [], "explicit"),
        (21, [OTHER], [{"id": "fact-19", "reason": "compacted"}], "explicit"),
        (22, [OTHER, {**FACT, "mode": "summary"}], [], "explicit"),
        (23, [OTHER], [], "explicit"),
    ]
    story = item_lifecycle("fact-19", calls)

    assert (story["first_seq"], story["last_seq"], story["first_seen_seq"]) == (19, 22, 19)
    assert [(entry["seq"], entry["position"], entry["mode"]) for entry in story["included"]] == [
        (19, 1, "verbatim"),
        (20, 0, "verbatim"),
        (22, 1, "summary"),
    ]
    assert story["included"][0]["tokens"] == 40
    assert story["included"][0]["version"] == "1"
    assert story["excluded"] == [{"seq": 21, "reason": "compacted"}]
    assert story["left"] == [
        {"seq": 21, "reason": "compacted", "without_reason": False, "manifest_source": "explicit"},
        {"seq": 23, "reason": None, "without_reason": True, "manifest_source": "explicit"},
    ]


def test_a_derived_manifest_never_says_dropped_without_a_reason():
    story = item_lifecycle("fact-19", [(1, [FACT], [], "derived"), (2, [OTHER], [], "derived")])

    assert story["left"] == [
        {"seq": 2, "reason": None, "without_reason": False, "manifest_source": "derived"}
    ]


def test_an_item_never_included_has_no_first_call():
    story = item_lifecycle("fact-19", [(1, [OTHER], [{"id": "fact-19", "reason": "budget"}], "explicit")])

    assert (story["first_seq"], story["last_seq"], story["first_seen_seq"]) == (None, None, 1)
    assert story["left"] == []


RESULT_1 = item("tr-1", "tool_results", 300)
RESULT_2 = item("tr-2", "tool_results", 300)
CLEAR = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1}]


def test_a_message_gone_at_a_compacted_call_left_by_the_compaction():
    summary = item("summary-1", "summary", 80, mode="summary")
    calls = [
        (1, [OTHER, FACT], [], "derived", []),
        (2, [summary], [], "derived", [{"type": "compacted"}]),
    ]
    story = item_lifecycle("fact-19", calls)
    assert story["left"] == [
        {
            "seq": 2,
            "reason": "compacted",
            "without_reason": False,
            "manifest_source": "derived",
            "context_edit": "compacted",
        }
    ]


def test_a_tool_result_the_provider_cleared_left_at_that_call_though_the_request_still_carried_it():
    calls = [
        (1, [OTHER, RESULT_1], [], "derived", []),
        (2, [OTHER, RESULT_1, RESULT_2], [], "derived", CLEAR),  # the oldest result is cleared
        (3, [OTHER, RESULT_1, RESULT_2], [], "derived", CLEAR),
    ]
    story = item_lifecycle("tr-1", calls)
    assert [entry.get("cleared_by") for entry in story["included"]] == [
        None,
        CLEAR[0]["type"],
        CLEAR[0]["type"],
    ]
    assert story["left"] == [
        {
            "seq": 2,
            "reason": "clear_tool_uses_20250919",
            "without_reason": False,
            "manifest_source": "derived",
            "context_edit": "clear_tool_uses_20250919",
        }
    ]
    # The newer result was not cleared: the model saw it on every call.
    assert item_lifecycle("tr-2", calls)["left"] == []


def test_the_builders_own_reason_outranks_the_compaction_flag():
    calls = [
        (1, [OTHER, FACT], [], "explicit", []),
        (2, [OTHER], [{"id": "fact-19", "reason": "budget"}], "explicit", [{"type": "compacted"}]),
    ]
    [left] = item_lifecycle("fact-19", calls)["left"]
    assert (left["reason"], "context_edit" in left) == ("budget", False)
