"""A diff of two versions of an item, as segments a template shows with the changed bytes highlighted.

Words first, then characters inside a replaced word pair that is mostly the same (a date or a counter
that moved on shows exactly the digits that changed); two texts that share little are shown as one
removal and one insertion rather than a confetti of coincidental matches. The templates escape every
segment (they are trace data); nothing here produces markup.
"""

import re
from difflib import SequenceMatcher

from ctxcore.analysis.textdiff import changed_span

# Context kept around each change; longer unchanged runs are collapsed to their ends.
CONTEXT = 160
# Above this many differing characters (after the common prefix and suffix) the middle is shown as a
# whole removal and insertion: a matcher is quadratic in the worst case.
MATCH_LIMIT = 20_000
SHOWN = 20_000
# Below this similarity the two middles are unrelated texts, not an edit of one another.
RELATED = 0.4
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def _collapse(text: str, where: str) -> list[tuple[str, str]]:
    """An unchanged run, cut to its ends: ``where`` is "start", "middle" or "end" of the text."""
    if len(text) <= 2 * CONTEXT or (where != "middle" and len(text) <= CONTEXT):
        return [("equal", text)]
    if where == "start":
        return [("skip", f"{len(text) - CONTEXT:,} unchanged characters"), ("equal", text[-CONTEXT:])]
    if where == "end":
        return [("equal", text[:CONTEXT]), ("skip", f"{len(text) - CONTEXT:,} unchanged characters")]
    return [
        ("equal", text[:CONTEXT]),
        ("skip", f"{len(text) - 2 * CONTEXT:,} unchanged characters"),
        ("equal", text[-CONTEXT:]),
    ]


def _chars(old: str, new: str) -> list[tuple[str, str]]:
    """A replaced stretch: character by character when the two sides are mostly alike."""
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    if len(old) + len(new) > 400 or matcher.ratio() < 0.5:
        return [("delete", old), ("insert", new)]
    out: list[tuple[str, str]] = []
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            out.append(("equal", old[a1:a2]))
        if op in ("delete", "replace"):
            out.append(("delete", old[a1:a2]))
        if op in ("insert", "replace"):
            out.append(("insert", new[b1:b2]))
    return out


def _middle(old: str, new: str) -> list[tuple[str, str]]:
    if len(old) + len(new) > MATCH_LIMIT:
        return [("delete", old[:SHOWN]), ("insert", new[:SHOWN])]
    old_words, new_words = _WORDS.findall(old), _WORDS.findall(new)
    matcher = SequenceMatcher(None, old_words, new_words, autojunk=False)
    if matcher.ratio() < RELATED:
        return [("delete", old[:SHOWN]), ("insert", new[:SHOWN])]
    out: list[tuple[str, str]] = []
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        before, after = "".join(old_words[a1:a2]), "".join(new_words[b1:b2])
        if op == "equal":
            out += _collapse(before, "middle")
        elif op == "replace":
            out += _chars(before, after)
        elif op == "delete":
            out.append(("delete", before))
        else:
            out.append(("insert", after))
    return out


def segments(old: str, new: str) -> dict:
    """``[{op, text}]`` with op in equal | delete | insert | skip, plus counts of what changed."""
    if old == new:
        return {"segments": [], "same": True, "deleted": 0, "inserted": 0, "offset": None}
    prefix, suffix = changed_span(old, new)
    out: list[tuple[str, str]] = []
    if prefix:
        out += _collapse(old[:prefix], "start")
    out += _middle(old[prefix : len(old) - suffix], new[prefix : len(new) - suffix])
    if suffix:
        out += _collapse(old[len(old) - suffix :], "end")
    merged: list[tuple[str, str]] = []
    for op, text in out:
        if not text:
            continue
        if merged and merged[-1][0] == op and op != "skip":
            merged[-1] = (op, merged[-1][1] + text)
        else:
            merged.append((op, text))
    return {
        "segments": [{"op": op, "text": text} for op, text in merged],
        "same": False,
        "deleted": sum(len(text) for op, text in merged if op == "delete"),
        "inserted": sum(len(text) for op, text in merged if op == "insert"),
        "offset": prefix,
    }
