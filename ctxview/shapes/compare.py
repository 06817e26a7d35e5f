"""Compare two calls of a run: items added, removed and changed, the shared prefix, bucket deltas."""

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ctxview.shapes import help, palette

LISTED = 500


def _buckets(call: Mapping[str, Any]) -> tuple[dict[str, int], bool]:
    """Tokens per bucket: the analysis's (reconciled) when there is one, else the items' own counts."""
    analysis = call.get("analysis") or {}
    if analysis.get("buckets"):
        return {key: value or 0 for key, value in analysis["buckets"]["parts"].items()}, True
    parts: dict[str, int] = {}
    for item in call["items"]:
        parts[item["bucket"]] = parts.get(item["bucket"], 0) + (item["tokens"] or 0)
    return parts, False


def compare(a: Mapping[str, Any], b: Mapping[str, Any], item_base: str) -> dict:
    """What call ``b`` has that ``a`` had not, and the other way round; items as ``call_dict`` gives them."""
    a_items = {item["id"]: item for item in a["items"]}
    b_items = {item["id"]: item for item in b["items"]}
    reasons = {entry["id"]: entry.get("reason") for entry in b["excluded"]}

    def link(item_id: str) -> str:
        return f"{item_base}{quote(item_id, safe='')}"

    added = [_row(item) | {"url": link(item["id"])} for item in b["items"] if item["id"] not in a_items]
    removed = []
    for item in a["items"]:
        if item["id"] in b_items:
            continue
        reason = reasons.get(item["id"])
        removed.append(
            _row(item)
            | {
                "url": link(item["id"]),
                "reason": reason
                or ("none recorded" if b["manifest_source"] == "explicit" else "unknown (derived manifest)"),
                "reason_help": help.reason_help(reason),
            }
        )
    changed, moved = [], 0
    for item in b["items"]:
        before = a_items.get(item["id"])
        if before is None:
            continue
        fields = [
            name
            for name in ("hash", "mode", "version", "tokens", "bucket", "pinned", "trust")
            if before[name] != item[name]
        ]
        if before["position"] != item["position"]:
            moved += 1
        if fields:
            changed.append(
                _row(item)
                | {
                    "url": link(item["id"]),
                    "fields": ["content" if name == "hash" else name for name in fields],
                    "content_changed": "hash" in fields,
                    "before": {name: before[name] for name in fields if name != "hash"},
                    "after": {name: item[name] for name in fields if name != "hash"},
                    "position_before": before["position"],
                    "tokens_before": before["tokens"],
                }
            )
    shared = 0
    for left, right in zip(a["items"], b["items"], strict=False):
        if left["hash"] != right["hash"]:
            break
        shared += 1
    a_buckets, a_reconciled = _buckets(a)
    b_buckets, b_reconciled = _buckets(b)
    bucket_rows = []
    for bucket in palette.BUCKET_ORDER:
        before, after = a_buckets.get(bucket) or 0, b_buckets.get(bucket) or 0
        if before or after:
            bucket_rows.append({"bucket": bucket, "a": before, "b": after, "delta": after - before})
    return {
        "added": added[:LISTED],
        "removed": removed[:LISTED],
        "changed": changed[:LISTED],
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed)},
        "unchanged": sum(1 for item_id in b_items if item_id in a_items) - len(changed),
        "moved": moved,
        "shared_prefix": shared,
        "buckets": bucket_rows,
        "reconciled": a_reconciled and b_reconciled,
        "total_a": sum(a_buckets.values()),
        "total_b": sum(b_buckets.values()),
    }


def _row(item: Mapping[str, Any]) -> dict:
    return {
        "id": item["id"],
        "kind": item["kind"],
        "bucket": item["bucket"],
        "mode": item["mode"],
        "tokens": item["tokens"],
        "tokens_estimated": item["tokens_estimated"],
        "version": item["version"],
        "position": item["position"],
        "pinned": item["pinned"],
    }
