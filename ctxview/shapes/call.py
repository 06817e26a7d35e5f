"""The call page's shapes: the budget gauge, the items table with the cache boundary, the prefix chain."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcore import catalogue
from ctxcore.vocabulary import in_middle, position_shares
from ctxview.shapes import palette

# SVG user units across a bar (the templates draw with viewBox="0 0 1000 h").
WIDTH = 1000
# The prefix strip merges neighbouring items of the same state above this many items.
STRIP_ITEMS = 300


def gauge(buckets: Mapping[str, Any] | None, budget: Mapping[str, Any] | None) -> dict | None:
    """Bars for the budget (scale: the model's limit) and the window (scale: the window), by bucket."""
    if not buckets:
        return None
    budget = budget or {}
    total = buckets["total"]
    limit = budget.get("limit")
    reserved = budget.get("reserved_output") or 0
    parts = [(bucket, buckets["parts"].get(bucket) or 0) for bucket in palette.BUCKET_ORDER]
    parts = [(bucket, tokens) for bucket, tokens in parts if tokens]

    def bar(scale: int) -> list[dict]:
        out, offset = [], 0
        for bucket, tokens in parts:
            out.append(
                {
                    "bucket": bucket,
                    "tokens": tokens,
                    "x": round(offset * WIDTH / scale, 2),
                    "width": round(tokens * WIDTH / scale, 2),
                }
            )
            offset += tokens
        return out

    result: dict[str, Any] = {
        "total": total,
        "limit": limit,
        "reserved": reserved,
        "window": bar(max(total, 1)),
        "rows": [
            {"bucket": bucket, "tokens": tokens, "share": tokens / total if total else 0}
            for bucket, tokens in parts
        ],
        "estimated": buckets.get("estimated"),
        "reconciled": buckets.get("reconciled"),
        "scale": buckets.get("scale"),
        "unknown_items": buckets.get("unknown_items") or 0,
    }
    if limit:
        scale = max(limit, total + reserved)
        result["budget"] = bar(scale)
        result["reserved_x"] = round((limit - reserved) * WIDTH / scale, 2)
        result["reserved_width"] = round(reserved * WIDTH / scale, 2)
        result["limit_x"] = round(limit * WIDTH / scale, 2)
        result["used_share"] = total / limit
        result["free"] = limit - reserved - total
        result["status"] = "over" if total > limit else "squeezed" if total + reserved > limit else "ok"
    return result


def item_rows(
    items: Sequence[Mapping[str, Any]],
    cache: Mapping[str, Any] | None,
    findings: Sequence[Mapping[str, Any]] = (),
) -> dict:
    """Items in render order with their window share, cache state and findings; where the boundary is."""
    cache = cache or {}
    reusable = cache.get("reusable_items")
    detail = cache.get("detail") or {}
    invalidator = cache.get("invalidator_item_id")
    invalid_position = detail.get("position") if invalidator else None
    known = [item["tokens"] for item in items if item["tokens"] is not None]
    total = sum(known)
    by_tokens = total > 0 and len(known) == len(items)
    by_item: dict[str, list[str]] = {}
    for finding in findings:
        if finding.get("item_id"):
            by_item.setdefault(finding["item_id"], []).append(finding["type"])
    rows = []
    shares = position_shares([item["tokens"] for item in items])
    for index, (item, (start, centre)) in enumerate(zip(items, shares, strict=True)):
        is_invalidator = invalidator is not None and (
            index == invalid_position if invalid_position is not None else item["id"] == invalidator
        )
        rows.append(
            {
                **item,
                "share": start,
                "in_middle": item["pinned"] and in_middle(centre),
                "cached": reusable is not None and index < reusable,
                "invalidator": is_invalidator,
                "findings": by_item.get(item["id"], []),
            }
        )
    return {
        "rows": rows,
        "boundary": reusable if reusable is not None and 0 < reusable < len(items) else None,
        "tokens_known": bool(known),
        "by_tokens": by_tokens,
        "total": total,
    }


def prefix_strip(rows: Sequence[Mapping[str, Any]], cache: Mapping[str, Any] | None) -> dict | None:
    """The chain as a strip: reused prefix, the invalidator, and the rest, proportional to tokens."""
    if not rows or not cache:
        return None
    weights = [max(row["tokens"] or 0, 1) for row in rows]
    total = sum(weights)
    # The invalidator may be a few tokens in a window of thousands: give it at least 1 % of the strip.
    weights = [
        max(weight, total // 100) if row["invalidator"] else weight
        for row, weight in zip(rows, weights, strict=True)
    ]
    total = sum(weights)
    cells: list[dict] = []
    offset = 0
    for row, weight in zip(rows, weights, strict=True):
        state = "invalidator" if row["invalidator"] else "cached" if row["cached"] else "fresh"
        x, width = offset * WIDTH / total, weight * WIDTH / total
        offset += weight
        if len(rows) > STRIP_ITEMS and cells and cells[-1]["state"] == state and state != "invalidator":
            cells[-1]["width"] = round(x + width - cells[-1]["x"], 2)
            cells[-1]["count"] += 1
            cells[-1]["label"] = f"{cells[-1]['count']} items ({state})"
            continue
        cells.append(
            {
                "x": round(x, 2),
                "width": round(width, 2),
                "state": state,
                "count": 1,
                "label": f"{row['position']}: {row['id']} ({state}, {row['tokens'] or 0:,} tokens)",
            }
        )
    boundary = cache.get("reusable_items") or 0
    boundary_x = sum(weights[:boundary]) * WIDTH / total
    return {
        "cells": cells,
        "boundary_x": round(boundary_x, 2),
        "cause": cache.get("cause"),
        "cause_help": catalogue.cause_help(cache.get("cause")),
    }


def neighbours(seqs_turns: Sequence[tuple[int, int | None, int]], seq: int) -> dict:
    """Previous and next call, and the first call of the previous and next turn: ``(seq, turn, id)`` rows."""
    ordered = sorted(seqs_turns)
    position = next(index for index, row in enumerate(ordered) if row[0] == seq)
    turn = ordered[position][1]
    previous = ordered[position - 1] if position > 0 else None
    following = ordered[position + 1] if position + 1 < len(ordered) else None
    earlier = [row for row in ordered[:position] if row[1] is not None and turn is not None and row[1] < turn]
    later = [
        row for row in ordered[position + 1 :] if row[1] is not None and turn is not None and row[1] > turn
    ]
    previous_turn = None
    if earlier:
        target = earlier[-1][1]
        previous_turn = next(row for row in earlier if row[1] == target)
    next_turn = later[0] if later else None
    return {
        "previous": previous,
        "next": following,
        "previous_turn": previous_turn,
        "next_turn": next_turn,
    }


# Causes whose first divergent item is another version of the same content: a byte diff reads well.
DIFF_CAUSES = frozenset({"key_order", "volatile_system_prompt", "system_changed"})
# Items named in the removed/inserted lists before "and N more".
STORY_ITEMS = 20


def diffable(cause: str | None, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Whether the break is two versions of one item (a diff helps) rather than items removed or added."""
    if old is None or new is None:
        return False
    return old["id"] == new["id"] or cause in DIFF_CAUSES


def rewrite_story(
    old_items: Sequence[Mapping[str, Any]],
    new_items: Sequence[Mapping[str, Any]],
    position: int,
    reasons: Mapping[str, str | None],
) -> dict:
    """What happened at and after the first divergent position: items removed (with why) and inserted.

    ``old_items`` are the cached call's, ``new_items`` this call's, both in render order; ``reasons`` maps
    an excluded item's id to this call's exclusion reason."""
    new_ids = {item["id"] for item in new_items}
    old_ids = {item["id"] for item in old_items}
    removed = [
        {"id": item["id"], "reason": reasons.get(item["id"])}
        for item in old_items[position:]
        if item["id"] not in new_ids
    ]
    inserted = [{"id": item["id"]} for item in new_items[position:] if item["id"] not in old_ids]
    by_reason: dict[str, int] = {}
    for entry in removed:
        key = entry["reason"] or "no reason given"
        by_reason[key] = by_reason.get(key, 0) + 1
    return {
        "position": position,
        "removed": removed[:STORY_ITEMS],
        "removed_count": len(removed),
        "removed_reasons": sorted(by_reason.items(), key=lambda pair: -pair[1]),
        "inserted": inserted[:STORY_ITEMS],
        "inserted_count": len(inserted),
        "removed_more": max(len(removed) - STORY_ITEMS, 0),
        "inserted_more": max(len(inserted) - STORY_ITEMS, 0),
        "truncated": position >= len(new_items),
        "written_again": max(len(new_items) - position, 0),
    }
