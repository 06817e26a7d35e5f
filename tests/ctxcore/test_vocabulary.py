"""The shared vocabulary's rules that every reader of telemetry applies alike."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcore.vocabulary import BUCKETS, ITEM_DEFAULTS, MAX_TOKENS, Item, count_of


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


# Stored item dicts: the required fields, any of the optional ones (an explicit None included), keys
# the stored form never has, and buckets the vocabulary does not know.
STORED_ITEMS = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=8), st.integers()), "hash": st.text(max_size=8)},
    optional={
        "kind": st.one_of(st.none(), st.sampled_from(["", "message", "tool"])),
        "bucket": st.one_of(st.none(), st.sampled_from(["", "system", "tools", "nonsense"])),
        "role": st.one_of(st.none(), st.sampled_from(["user", "assistant"])),
        "tokens": st.one_of(st.none(), st.integers(0, 10**6)),
        "tokens_estimated": st.booleans(),
        "mode": st.sampled_from(["verbatim", "summary"]),
        "version": st.one_of(st.none(), st.text(max_size=4)),
        "source": st.one_of(st.none(), st.text(max_size=4)),
        "trust": st.one_of(st.none(), st.sampled_from(["system", "user", "tool"])),
        "supersedes": st.one_of(st.none(), st.lists(st.text(max_size=4), max_size=3)),
        "pinned": st.booleans(),
        "origin_turn": st.one_of(st.none(), st.integers(0, 50)),
        "cache_breakpoint": st.booleans(),
        "content": st.text(max_size=4),
        "content_truncated": st.booleans(),
        "unknown": st.integers(),
    },
)


@settings(max_examples=300, deadline=None)
@given(STORED_ITEMS, st.integers(0, 1000))
def test_an_item_from_its_stored_dict_is_what_the_constructor_makes(data, position):
    # The reference: every optional stored field read with its default, through the dataclass's own
    # constructor; content is never read from the stored form.
    bucket = data.get("bucket") or "other"
    optional = {key: data.get(key, default) for key, default in ITEM_DEFAULTS.items()}
    expected = Item(
        id=str(data["id"]),
        kind=str(data.get("kind") or ""),
        bucket=bucket if bucket in BUCKETS else "other",
        hash=str(data["hash"]),
        position=position,
        **{**optional, "supersedes": tuple(optional["supersedes"] or ())},
    )
    made = Item.from_dict(data, position)
    assert made == expected
    assert vars(made) == vars(expected)  # every attribute, the ones equality ignores none of
    assert made.with_tokens(7) == expected.with_tokens(7)


@settings(max_examples=300, deadline=None)
@given(STORED_ITEMS, st.integers(0, 1000))
def test_an_item_made_fast_is_what_the_constructor_makes(data, position):
    from dataclasses import fields

    names = {field.name for field in fields(Item)}
    given_fields = {key: value for key, value in data.items() if key in names}
    given_fields.update(
        position=position, kind=data.get("kind") or "message", bucket=data.get("bucket") or "tools"
    )
    given_fields["supersedes"] = tuple(data.get("supersedes") or ())  # an item holds a tuple (hashable)
    made, constructed = Item.made(**given_fields), Item(**given_fields)
    assert made == constructed and hash(made) == hash(constructed)
    assert vars(made) == vars(constructed)  # every field, the unstored ones included
