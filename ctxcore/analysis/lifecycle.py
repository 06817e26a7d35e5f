"""The life of one item across a run: where it was included, excluded, and when it left and why."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def item_lifecycle(
    item_id: str,
    calls: Iterable[tuple[int, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]], str]],
) -> dict:
    """Per call, in seq order, of ``(seq, items, excluded, manifest_source)``: the item's whole story.

    ``left`` lists each call where the item stopped being included, with the exclusion reason when that
    call lists one; ``without_reason`` is true only when an explicit manifest neither includes nor
    excludes it (a derived manifest has no exclusions, so its reason is simply unknown).
    """
    included: list[dict] = []
    excluded: list[dict] = []
    left: list[dict] = []
    was_included = False
    for seq, items, exclusions, manifest_source in calls:
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
                }
            )
        elif reason is not None:
            excluded.append({"seq": seq, "reason": reason})
        if was_included and position is None:
            left.append(
                {
                    "seq": seq,
                    "reason": reason,
                    "without_reason": reason is None and manifest_source == "explicit",
                    "manifest_source": manifest_source,
                }
            )
        was_included = position is not None
    return {
        "item_id": item_id,
        "first_seq": included[0]["seq"] if included else None,
        "last_seq": included[-1]["seq"] if included else None,
        "first_seen_seq": min([entry["seq"] for entry in included + excluded], default=None),
        "included": included,
        "excluded": excluded,
        "left": left,
    }
