"""A character diff of two versions of an item, as segments a template shows with the changes highlighted.

The templates escape every segment (they are trace data); nothing here produces markup.
"""

from difflib import SequenceMatcher

from ctxview.analysis.textdiff import changed_span

# Context kept around each change; longer unchanged runs are collapsed to their ends.
CONTEXT = 160
# Above this many differing characters (after the common prefix and suffix) the middle is shown as a
# whole removal and insertion: a character matcher is quadratic in the worst case.
MATCH_LIMIT = 6000
SHOWN = 20_000


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


def segments(old: str, new: str) -> dict:
    """``[(op, text)]`` with op in equal | delete | insert | skip, plus counts of what changed."""
    if old == new:
        return {"segments": [], "same": True, "deleted": 0, "inserted": 0, "offset": None}
    prefix, suffix = changed_span(old, new)
    old_mid, new_mid = old[prefix : len(old) - suffix], new[prefix : len(new) - suffix]
    out: list[tuple[str, str]] = []
    if prefix:
        out += _collapse(old[:prefix], "start")
    if len(old_mid) + len(new_mid) <= MATCH_LIMIT:
        matcher = SequenceMatcher(None, old_mid, new_mid, autojunk=False)
        for op, a1, a2, b1, b2 in matcher.get_opcodes():
            if op == "equal":
                out += _collapse(old_mid[a1:a2], "middle")
            if op in ("delete", "replace"):
                out.append(("delete", old_mid[a1:a2][:SHOWN]))
            if op in ("insert", "replace"):
                out.append(("insert", new_mid[b1:b2][:SHOWN]))
    else:
        if old_mid:
            out.append(("delete", old_mid[:SHOWN]))
        if new_mid:
            out.append(("insert", new_mid[:SHOWN]))
    if suffix:
        out += _collapse(old[len(old) - suffix :], "end")
    deleted = sum(len(text) for op, text in out if op == "delete")
    inserted = sum(len(text) for op, text in out if op == "insert")
    return {
        "segments": [{"op": op, "text": text} for op, text in out if text],
        "same": False,
        "deleted": deleted,
        "inserted": inserted,
        "offset": prefix,
    }
