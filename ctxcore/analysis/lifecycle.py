"""The life of one item across a run: where it was included, excluded, and when it left and why."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxcore.analysis import limits


def cleared_by(items: Sequence[Mapping[str, Any]], edits: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The items a provider's context edit cleared inside this request, by id -> the edit's type.

    The request still carries them (the trace shows them), but the model did not see them: Anthropic
    clears the oldest tool results first, as many as the edit reports (``cleared_tool_uses``)."""
    results = [item["id"] for item in items if item.get("kind") == "tool_result"]
    found: dict[str, str] = {}
    for edit in edits:
        count = edit.get("cleared_tool_uses")
        if isinstance(count, int) and count > 0:
            for item_id in results[:count]:
                found.setdefault(item_id, edit["type"])
    return found


def item_lifecycle(
    item_id: str,
    calls: Iterable[tuple],
) -> dict:
    """Per call, in seq order, of ``(seq, items, excluded, manifest_source[, context_edits])``: the
    item's whole story.

    ``left`` lists each call where the item stopped being included, with the exclusion reason when that
    call lists one; ``without_reason`` is true only when an explicit manifest neither includes nor
    excludes it (a derived manifest has no exclusions, so its reason is simply unknown). An item that
    left by a compaction, or that the provider's context editing cleared inside the request (``cleared_by``
    on that call's inclusion), says so: ``context_edit`` names the edit.
    """
    included: list[dict] = []
    excluded: list[dict] = []
    left: list[dict] = []
    was_seen = False
    for seq, items, exclusions, manifest_source, *rest in calls:
        edits = rest[0] if rest else ()
        cleared = cleared_by(items, edits)
        position = next((index for index, item in enumerate(items) if item["id"] == item_id), None)
        reason = next((entry.get("reason") for entry in exclusions if entry["id"] == item_id), None)
        if position is not None:
            item = items[position]
            included.append(
                {
                    "seq": seq,
                    "position": position,
                    "position_share": round(position / len(items), 4),
                    "mode": item.get("mode", "verbatim"),
                    "version": item.get("version"),
                    "tokens": item.get("tokens"),
                    **({"cleared_by": cleared[item_id]} if item_id in cleared else {}),
                }
            )
        elif reason is not None:
            excluded.append({"seq": seq, "reason": reason})
        seen = position is not None and item_id not in cleared  # what the model saw
        if was_seen and not seen:
            # The builder's own reason, where it gave one, says more than the call's compaction flag.
            compacted = position is None and any(edit.get("type") == limits.COMPACTED for edit in edits)
            edit = cleared.get(item_id) or (limits.COMPACTED if compacted and reason is None else None)
            reason = reason or edit
            left.append(
                {
                    "seq": seq,
                    "reason": reason,
                    "without_reason": reason is None and manifest_source == "explicit",
                    "manifest_source": manifest_source,
                    **({"context_edit": edit} if edit else {}),
                }
            )
        was_seen = seen
    return {
        "item_id": item_id,
        "first_seq": included[0]["seq"] if included else None,
        "last_seq": included[-1]["seq"] if included else None,
        "first_seen_seq": min([entry["seq"] for entry in included + excluded], default=None),
        "included": included,
        "excluded": excluded,
        "left": left,
    }
