"""Where two versions of a text differ, whether the difference is a volatile value, and JSON key order."""

import json
import re

from ctxcore.jsonpath import where

_CONTEXT = 24
_SHOWN = 200
_TOKEN_CHARS = re.compile(r"[\w:.\-/+]")
_VOLATILE = [
    ("uuid", re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)),
    (
        "timestamp",
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", re.I),
    ),
    ("date", re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}|\d{4}/\d{2}/\d{2}")),
    ("time", re.compile(r"\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[ap]m)?", re.I)),
    (
        "date",
        re.compile(
            r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|(?:jan|febr)uary|march|april|may|june|july|august"
            r"|(?:septem|octo|novem|decem)ber|(?:mon|tue|wed|thu|fri|sat|sun|jan|feb|mar|apr|jun|jul|aug|sep|oct"
            r"|nov|dec)\.?",
            re.I,
        ),
    ),
    ("counter", re.compile(r"[#v]?\d+")),
    ("id", re.compile(r"[0-9a-f]{8,}", re.I)),
]


def changed_span(old: str, new: str) -> tuple[int, int]:
    """Lengths of the common prefix and of the common suffix (not overlapping it)."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return prefix, suffix


def byte_diff(old: str, new: str) -> dict:
    """The differing part of two texts with a little context on each side, bounded for display."""
    prefix, suffix = changed_span(old, new)
    return {
        "offset": prefix,
        "before": old[max(0, prefix - _CONTEXT) : prefix],
        "old": old[prefix : len(old) - suffix][:_SHOWN],
        "new": new[prefix : len(new) - suffix][:_SHOWN],
        "after": old[len(old) - suffix : len(old) - suffix + _CONTEXT],
    }


def _widened(text: str, start: int, end: int) -> str:
    """The changed part of a text widened to the whole words it cuts through."""
    while start > 0 and _TOKEN_CHARS.match(text[start - 1]):
        start -= 1
    while end < len(text) and _TOKEN_CHARS.match(text[end]):
        end += 1
    return text[start:end]


def _volatile_kind(word: str) -> str | None:
    word = word.strip(".,;:()[]{}\"'")
    for kind, pattern in _VOLATILE:
        if pattern.fullmatch(word):
            return kind
    return None


def volatile_kind(old: str, new: str) -> str | None:
    """ "date", "time", "timestamp", "uuid", "counter" or "id" when every changed word is such a value."""
    prefix, suffix = changed_span(old, new)
    if old == new:
        return None
    old_words = _widened(old, prefix, len(old) - suffix).split()
    new_words = _widened(new, prefix, len(new) - suffix).split()
    if not old_words or len(old_words) != len(new_words):
        return None
    kinds = []
    for old_word, new_word in zip(old_words, new_words, strict=True):
        if old_word == new_word:
            continue
        old_kind, new_kind = _volatile_kind(old_word), _volatile_kind(new_word)
        if old_kind is None or new_kind is None:
            return None
        kinds.append(new_kind)
    return kinds[0] if kinds else None


def same_json_other_order(old: str, new: str) -> bool:
    """Whether two different texts parse to equal JSON (a non-deterministic serialisation)."""
    if old == new or old.lstrip()[:1] not in "{[" or new.lstrip()[:1] not in "{[":
        return False
    try:
        return json.loads(old) == json.loads(new)
    except ValueError:
        return False


MOVED_SHOWN = 20


def moved_keys(old: str, new: str) -> list[dict]:
    """Where two texts of equal JSON list an object's keys in another order: each such object's place
    (``tools[0].input_schema.properties``) and its keys before and after, outermost first, at most
    MOVED_SHOWN of them. Empty unless ``same_json_other_order(old, new)``."""
    if not same_json_other_order(old, new):
        return []
    moved: list[dict] = []
    stack: list[tuple[tuple, object, object]] = [((), json.loads(old), json.loads(new))]
    while stack and len(moved) < MOVED_SHOWN:
        path, before, after = stack.pop(0)
        if isinstance(before, dict) and isinstance(after, dict):
            if list(before) != list(after):
                moved.append(
                    {"where": where(path, "the top level"), "before": list(before), "after": list(after)}
                )
            stack.extend(((*path, key), before[key], after[key]) for key in before)
        elif isinstance(before, list) and isinstance(after, list):
            # Equal JSON: lists of the same length.
            pairs = enumerate(zip(before, after, strict=True))
            stack.extend(((*path, index), old_value, new_value) for index, (old_value, new_value) in pairs)
    return moved
