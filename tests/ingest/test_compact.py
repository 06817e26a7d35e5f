"""The item-list codec: what changed since a base list, and back; packed JSON."""

import random
import zlib

import orjson
import pytest

from ingest import compact


def item(name: str, tokens: int = 10) -> dict:
    return {"id": name, "hash": name * 4, "kind": "message", "bucket": "conversation", "tokens": tokens}


def roundtrip(base: list[dict], items: list[dict]) -> tuple[list[int], list[dict]]:
    ops, entered = compact.encode(base, items)
    assert compact.decode(base, ops, entered) == items
    return ops, entered


def test_an_appended_history_copies_the_base_in_one_run():
    base = [item(f"m{n}") for n in range(50)]
    ops, entered = roundtrip(base, [*base, item("new1"), item("new2")])
    assert ops == [0, 50, compact.FROM_ENTERED, 2]
    assert [entry["id"] for entry in entered] == ["new1", "new2"]


def test_a_changed_field_makes_the_item_new():
    base = [item("a"), item("b"), item("c")]
    ops, entered = roundtrip(base, [item("a"), item("b", tokens=11), item("c")])
    assert entered == [item("b", tokens=11)]
    assert ops == [0, 1, compact.FROM_ENTERED, 1, 2, 1]


def test_a_sliding_window_drops_the_oldest_items():
    base = [item(f"m{n}") for n in range(10)]
    ops, entered = roundtrip(base, [*base[3:], item("m10")])
    assert ops == [3, 7, compact.FROM_ENTERED, 1]


def test_reordered_repeated_and_empty_lists_rebuild():
    base = [item("a"), item("b"), item("a"), item("c")]
    roundtrip(base, [item("c"), item("a"), item("a"), item("b"), item("c"), item("a")])
    roundtrip(base, [])
    roundtrip([], [item("x")])
    assert compact.unpack(compact.pack([item("x")])) == [item("x")]


def test_random_edits_always_rebuild():
    rng = random.Random(3)
    pool = [item(f"i{n}", tokens=n % 5) for n in range(30)]
    for _ in range(300):
        base = rng.choices(pool, k=rng.randint(0, 25))
        items = list(base)
        for _ in range(rng.randint(0, 6)):
            action = rng.choice(["insert", "delete", "replace"])
            position = rng.randint(0, len(items))
            if action == "insert":
                items.insert(position, rng.choice(pool))
            elif items and position < len(items):
                if action == "delete":
                    del items[position]
                else:
                    items[position] = rng.choice(pool)
        ops, entered = roundtrip(base, items)
        assert len(entered) <= len(items)
        assert sum(ops[1::2]) == len(items)


def test_a_copy_beyond_the_base_is_refused():
    with pytest.raises(ValueError, match="base"):
        compact.decode([item("a")], [0, 2], [])


def test_packed_json_reads_back_whatever_its_size_and_whichever_window_packed_it():
    small = {"buckets": {"total": 920}, "cache": {"broke": False}, "conflicts": []}
    large = {**small, "conflicts": [{"item_id": f"msg:{n}", "versions": [n, n + 1]} for n in range(500)]}
    for value in (small, large, None, [1, "é", 2.5]):
        assert compact.unpack_json(compact.pack_json(value)) == value
    # Rows written before the window was made smaller: zlib's default window.
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=compact._DICTIONARIES[1])
    old = bytes([1]) + compressor.compress(orjson.dumps(large)) + compressor.flush()
    assert compact.unpack_json(old) == large
