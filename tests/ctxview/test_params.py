"""The query-string parsers the pages, the panels and the API share (pure: no database)."""

from datetime import UTC, datetime

import pytest

from ctxview.params import BadParameter, int_param, time_param


def test_a_whole_number_within_bounds():
    assert int_param({"n": " 7 "}, "n", 1, 1, 10) == 7
    assert int_param({}, "n", 1, 1, 10) == 1
    with pytest.raises(BadParameter, match="n must be between 1 and 10"):
        int_param({"n": "11"}, "n", 1, 1, 10)
    with pytest.raises(BadParameter, match="n must be a whole number, not 'x'"):
        int_param({"n": "x"}, "n", 1, 1, 10)


def test_an_empty_number_is_the_default_on_a_page_and_refused_by_the_api():
    assert int_param({"n": ""}, "n", 3, 1, 10) == 3
    with pytest.raises(BadParameter, match="n must be a whole number"):
        int_param({"n": ""}, "n", 3, 1, 10, blank_is_default=False)


@pytest.mark.parametrize(
    "value, until, expected",
    [
        ("2026-11-30", False, datetime(2026, 11, 30, tzinfo=UTC)),
        ("2026-11-30", True, datetime(2026, 12, 1, tzinfo=UTC)),
        ("2026-11-30T09:00", False, datetime(2026, 11, 30, 9, tzinfo=UTC)),
        (" 2026-11-30T09:00Z ", False, datetime(2026, 11, 30, 9, tzinfo=UTC)),
        # PostgreSQL refuses offsets past 15:59 (the page answered 500): read in UTC.
        ("2026-11-30T09:00+20:00", False, datetime(2026, 11, 29, 13, tzinfo=UTC)),
        ("9999-12-31", True, datetime.max.replace(tzinfo=UTC)),
        ("0001-01-01T00:00+05:00", False, datetime.min.replace(tzinfo=UTC)),
        ("", False, None),
    ],
)
def test_a_moment_on_a_page(value, until, expected):
    assert time_param({"t": value}, "t", end_of_day=until) == expected


def test_a_moment_in_the_api_is_a_date_and_time_with_its_zone():
    assert time_param({"t": "2026-11-30T09:00:00-01:00"}, "t", zone_required=True) == datetime(
        2026, 11, 30, 10, tzinfo=UTC
    )
    assert time_param({}, "t", zone_required=True) is None
    for value in ("", "2026-11-30", "2026-11-30T09:00", "yesterday"):
        with pytest.raises(BadParameter, match="t must be an ISO 8601 date and time with a time zone"):
            time_param({"t": value}, "t", zone_required=True)
    with pytest.raises(BadParameter, match="t must be a date .* not 'yesterday'"):
        time_param({"t": "yesterday"}, "t")
