"""A call's item list as what changed since a base list: the codec. No Django.

A run resends its history, so call n's items are mostly call n - 1's. A list is stored as ``ops`` over
its base plus the items it does not take from the base (``entered``, in order)::

    ops = [start, length, start, length, ...]   start >= 0: base[start:start + length]
                                                start == -1: the next ``length`` entered items

A snapshot has no base: it holds its items whole, zlib-compressed JSON (``pack``/``unpack``).
"""

import zlib
from collections.abc import Mapping, Sequence

import orjson

FROM_ENTERED = -1


def _key(item: Mapping) -> bytes:
    # Two stored items are the same item only if every field is equal (tokens, version, ...).
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS)


def encode(base: Sequence[Mapping], items: Sequence[Mapping]) -> tuple[list[int], list[dict]]:
    """``(ops, entered)`` that rebuild ``items`` from ``base`` (greedy longest runs of equal items)."""
    base_keys = [_key(item) for item in base]
    positions: dict[bytes, list[int]] = {}
    for index, key in enumerate(base_keys):
        positions.setdefault(key, []).append(index)
    ops: list[int] = []
    entered: list[dict] = []
    expected = 0  # where the last run of copied items ended: the likeliest next match
    index = 0
    while index < len(items):
        key = _key(items[index])
        found = positions.get(key)
        if not found:
            entered.append(dict(items[index]))
            _append(ops, FROM_ENTERED, 1)
            index += 1
            continue
        start = expected if expected < len(base_keys) and base_keys[expected] == key else found[0]
        length = 1
        while (
            index + length < len(items)
            and start + length < len(base_keys)
            and base_keys[start + length] == _key(items[index + length])
        ):
            length += 1
        _append(ops, start, length)
        index += length
        expected = start + length
    return ops, entered


def _append(ops: list[int], start: int, length: int) -> None:
    """Add a run to ``ops``, merged with the previous one when it continues it."""
    if ops:
        last_start, last_length = ops[-2], ops[-1]
        if (start == FROM_ENTERED and last_start == FROM_ENTERED) or (
            start >= 0 and last_start >= 0 and last_start + last_length == start
        ):
            ops[-1] += length
            return
    ops.extend((start, length))


# A call's analysis (ctxcore.analysis.CallAnalysis: buckets, cache, conflicts) is ~600 bytes of JSON,
# mostly the same keys every call: compressed against a typical one, it takes ~60-150 bytes.
_ANALYSIS_SAMPLE = (
    b'{"cache":{"broke":false,"cause":null,"detail":{},"minimum":1024,"cost_usd":null,"disagrees":null,'
    b'"calibration":null,"cached_items":0,"expected_read":0,"reference_seq":null,"reported_read":null,'
    b'"reusable_items":0,"reusable_tokens":0,"calibration_note":null,"tokens_rewritten":0,'
    b'"provider_diagnosis":null,"invalidator_item_id":null},"buckets":{"parts":{"other":0,"tools":0,'
    b'"memory":0,"system":0,"summary":0,"retrieved":0,"scaffolding":0,"conversation":0,"tool_results":0},'
    b'"scale":1.0,"total":0,"estimated":true,"reconciled":true,"items_total":0,"prompt_total":0,'
    b'"unknown_items":0},"conflicts":[]}'
)
# The first byte of a packed value names its dictionary, so a new one can be added without rewriting rows.
_DICTIONARIES = {1: _ANALYSIS_SAMPLE}
_DICTIONARY = 1


# A 2 KB window (the dictionary and a value of up to ~1.4 KB) and small hash tables: zlib's default
# state is 256 KB, set up anew for each value, and was two thirds of the time packing one took
# (18 -> 7 us a call, the same bytes for a typical analysis). Read with any window: rows packed with
# the default one read as before.
_WINDOW_BITS, _MEMORY_LEVEL = 11, 3


def pack_json(value) -> bytes:
    """JSON, deflated against a preset dictionary."""
    compressor = zlib.compressobj(
        6, zlib.DEFLATED, -_WINDOW_BITS, _MEMORY_LEVEL, zdict=_DICTIONARIES[_DICTIONARY]
    )
    return bytes([_DICTIONARY]) + compressor.compress(orjson.dumps(value)) + compressor.flush()


def unpack_json(data: bytes | memoryview):
    data = bytes(data)
    decompressor = zlib.decompressobj(-15, zdict=_DICTIONARIES[data[0]])
    return orjson.loads(decompressor.decompress(data[1:]) + decompressor.flush())


def pack(items: Sequence[Mapping]) -> bytes:
    """A list stored whole."""
    return zlib.compress(orjson.dumps(items), 6)


def unpack(data: bytes | memoryview) -> list[dict]:
    return orjson.loads(zlib.decompress(data))


def decode(base: Sequence[Mapping] | None, ops: Sequence[int], entered: Sequence[Mapping]) -> list[dict]:
    """The items ``encode`` was given (the dicts are the base's and entered's own: read, don't change)."""
    items: list[dict] = []
    taken = 0
    for position in range(0, len(ops), 2):
        start, length = ops[position], ops[position + 1]
        if start == FROM_ENTERED:
            items.extend(entered[taken : taken + length])
            taken += length
        else:
            if base is None or start + length > len(base):
                raise ValueError("an item list copies from a base it does not have")
            items.extend(base[start : start + length])
    return items
