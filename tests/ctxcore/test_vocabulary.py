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


def test_an_item_with_other_tokens_equals_dataclasses_replace():
    from dataclasses import fields, replace

    from ctxcore.vocabulary import Item

    item = Item(id="i", kind="message", bucket="conversation", hash="h", position=3, role="user", tokens=5,
                supersedes=("a",), pinned=True, content="text", version="2")  # fmt: skip
    changed = item.with_tokens(12)
    assert changed == replace(item, tokens=12) and hash(changed) == hash(replace(item, tokens=12))
    assert (item.tokens, changed.tokens) == (5, 12)
    assert all(getattr(changed, f.name) == getattr(item, f.name) for f in fields(Item) if f.name != "tokens")
    assert not hasattr(Item, "__post_init__")  # with_tokens skips it: it would need calling here
