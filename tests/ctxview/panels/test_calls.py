import pytest

from ctxview.panels import calls
from ctxview.params import BadParameter
from tests.ctxview.panels.rows import series_row


def test_a_page_of_calls_with_hit_rate_and_cache_outcome():
    rows = [series_row(51, 20, read=900, write=0, uncached=100), series_row(52, 20, broke=True)]
    page = calls.page_of(rows, 52, 2)
    assert (page["page"], page["pages"], page["previous"], page["next"], page["total"]) == (2, 2, 1, None, 52)
    assert page["rows"][0]["hit_rate"] == 0.9 and not page["rows"][0]["broke"]
    assert page["rows"][1]["broke"] and page["rows"][1]["cause"] == "history_rewritten"
    assert page["rows"][1]["cause_help"].startswith("earlier history")


def test_a_page_past_the_end_says_how_many_there_are():
    with pytest.raises(BadParameter, match="page 3 does not exist: the calls of this run fill 2 pages"):
        calls.page_of([], 60, 3)
    assert calls.page_of([], 0, 1)["pages"] == 1


def test_a_page_flags_the_calls_with_notes_or_a_bookmark():
    rows = [series_row(1, 1), series_row(2, 1), series_row(3, 2)]
    page = calls.page_of(
        rows, 3, 1, marks={1: {"notes": 2, "bookmarked": False}, 3: {"notes": 0, "bookmarked": True}}
    )
    assert [(row["notes"], row["bookmarked"]) for row in page["rows"]] == [(2, False), (0, False), (0, True)]
    assert [row["notes"] for row in calls.page_of([series_row(1, 1)], 1, 1)["rows"]] == [0]
