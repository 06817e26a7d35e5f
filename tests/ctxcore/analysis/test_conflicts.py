"""Conflicting versions in one call, superseded items kept, and stale versions."""

from ctxcore.analysis.conflicts import VERSIONS_PER_SOURCE, call_conflicts, updated_index
from ctxcore.vocabulary import Item
from tests.ctxcore.analysis.builders import analyse, call, findings_of, item, message, system


def file_item(item_id: str, version: str, **fields) -> dict:
    return item(
        item_id,
        "retrieved",
        300,
        f"{item_id}@{version}",
        source="src/api/billing.ts",
        version=version,
        **fields,
    )


def test_two_versions_of_one_source_in_one_call_conflict():
    results, _ = analyse(
        [call(1, [system(), file_item("read-20", "v1"), message(1), file_item("edit-45", "v2")])]
    )

    assert results[0]["conflicts"] == [
        {
            "type": "conflicting_versions",
            "source": "src/api/billing.ts",
            "versions": ["v1", "v2"],
            "item_ids": ["read-20", "edit-45"],
        }
    ]
    [finding] = findings_of(results, "conflicting_versions")
    assert (finding["call_seq"], finding["item_id"], finding["severity"]) == (1, "read-20", "warning")


def test_an_item_superseded_by_another_included_item_is_reported():
    plan_v1 = item("plan-5", "memory", 150)
    plan_v2 = item("plan-60", "memory", 150, supersedes=["plan-5"])
    results, _ = analyse([call(1, [system(), plan_v1, message(1), plan_v2])])

    assert results[0]["conflicts"] == [
        {"type": "superseded_included", "item_id": "plan-5", "superseded_by": "plan-60"}
    ]
    [finding] = findings_of(results, "superseded_included")
    assert (finding["call_seq"], finding["item_id"]) == (1, "plan-5")
    assert finding["evidence"] == {"item_id": "plan-5", "superseded_by": "plan-60"}


def test_a_version_older_than_one_already_used_in_the_run_is_stale():
    calls = [
        call(1, [system(), file_item("billing", "v1")]),
        call(2, [system(), file_item("billing", "v2")]),
        call(3, [system(), file_item("billing", "v1")]),
    ]
    results, _ = analyse(calls)

    assert results[0]["conflicts"] == results[1]["conflicts"] == []
    assert results[2]["conflicts"] == [
        {
            "type": "stale_version",
            "item_id": "billing",
            "source": "src/api/billing.ts",
            "version": "v1",
            "newest_version": "v2",
        }
    ]
    [finding] = findings_of(results, "stale_version")
    assert (finding["call_seq"], finding["item_id"]) == (3, "billing")


def test_older_means_first_seen_earlier_not_a_smaller_label():
    calls = [call(1, [file_item("f", "b")]), call(2, [file_item("f", "a")]), call(3, [file_item("f", "b")])]
    results, _ = analyse(calls)

    assert [len(result["conflicts"]) for result in results] == [0, 0, 1]
    assert results[2]["conflicts"][0]["newest_version"] == "a"


def test_a_conflict_that_lasts_is_reported_where_it_starts_and_again_when_it_returns():
    both = [file_item("read", "v1"), file_item("edit", "v2")]
    calls = [
        call(1, [system(), *both]),
        call(2, [system(), *both, message(1)]),
        call(3, [system(), file_item("edit", "v2")]),
        call(4, [system(), *both]),
    ]
    results, _ = analyse(calls)

    # From call 2 on, v1 is also stale: v2 was used in call 1.
    assert [len(result["conflicts"]) for result in results] == [1, 2, 0, 2]
    assert [finding["call_seq"] for finding in findings_of(results, "conflicting_versions")] == [1, 4]
    assert [finding["call_seq"] for finding in findings_of(results, "stale_version")] == [2, 4]


def test_the_version_index_keeps_a_bounded_number_of_versions_per_source():
    index: dict = {}
    for number in range(VERSIONS_PER_SOURCE + 5):
        index = updated_index(index, [Item.from_dict(file_item("f", f"v{number}"), 0)])
    ranks = index["src/api/billing.ts"]["ranks"]
    assert len(ranks) == VERSIONS_PER_SOURCE
    assert "v0" not in ranks and f"v{VERSIONS_PER_SOURCE + 4}" in ranks
    assert call_conflicts([Item.from_dict(file_item("f", "v0"), 0)], index) == []  # evicted: taken as unseen
