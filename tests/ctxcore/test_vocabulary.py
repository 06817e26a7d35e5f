"""The shared vocabulary's rules that every reader of telemetry applies alike."""

import pytest

from ctxcore.vocabulary import MAX_TOKENS, count_of


@pytest.mark.parametrize(
    "value, expected",
    [
        (12, 12),
        (12.0, 12),
        (" 12 ", 12),
        (0, 0),
        (MAX_TOKENS, MAX_TOKENS),
        (MAX_TOKENS + 1, None),  # junk: summed into a run's totals it would overflow them
        (-1, None),
        (True, None),
        (12.5, None),
        ("²", None),  # isdigit() says yes, int() says no
        ("1e3", None),
        ("9" * 14, None),
        (None, None),
        ([12], None),
    ],
)
def test_a_count_as_telemetry_sends_it(value, expected):
    assert count_of(value) == expected
