"""Manifests built for the purpose: items, calls and runs in the shapes the database layer passes."""

import hashlib
import json

from ctxcore.analysis import CallInput, analyse_call, new_state

SECOND = 10**9
T0 = 1_764_000_000 * SECOND


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def item(
    item_id: str, bucket: str = "conversation", tokens: int | None = 200, text: str | None = None, **fields
) -> dict:
    """A stored item, hashed from ``text`` (default: the id, so equal ids mean equal content)."""
    kind = fields.pop(
        "kind", {"tools": "tool", "system": "system", "tool_results": "tool_result"}.get(bucket, "message")
    )
    return {
        "id": item_id,
        "kind": kind,
        "bucket": bucket,
        "tokens": tokens,
        "hash": digest(text if text is not None else item_id),
        **fields,
    }


def tool(name: str, tokens: int = 600, text: str | None = None) -> dict:
    return item(f"tool:{name}", "tools", tokens, text if text is not None else f'{{"name":"{name}"}}')


def system(text: str = "You are the on-call assistant.", tokens: int = 1000, **fields) -> dict:
    return item("system:0", "system", tokens, text, **fields)


def message(number: int, tokens: int = 200, bucket: str = "conversation", **fields) -> dict:
    return item(f"m{number}", bucket, tokens, **fields)


def usage(prompt_total: int, read: int = 0, write: int = 0, output: int = 100) -> dict:
    return {
        "uncached": prompt_total - read - write,
        "cache_write": write,
        "cache_read": read,
        "output": output,
        "reasoning": None,
        "prompt_total": prompt_total,
    }


def call(
    seq: int,
    items: list[dict],
    *,
    at: float | None = None,
    duration: float = 2.0,
    model: str = "claude-sonnet-4-5-20250929",
    provider: str = "anthropic",
    read: int | None = None,
    write: int | None = None,
    prompt_total: int | None = -1,
    contents: dict | None = None,
    **fields,
) -> CallInput:
    """A call ``at`` seconds into the run (default: 10 s per seq); usage defaults to "all of it cached"."""
    start = T0 + int((at if at is not None else seq * 10) * SECOND)
    total = sum(entry["tokens"] or 0 for entry in items) if prompt_total == -1 else prompt_total
    if total is None:
        figures = {"output": 100}
    else:
        read = 0 if read is None else read
        write = total - read if write is None else write
        figures = usage(total, read, write)
    return CallInput.from_dict(
        {
            "seq": seq,
            "turn": seq,
            "start_ns": start,
            "end_ns": start + int(duration * SECOND),
            "model": model,
            "provider": provider,
            "usage": figures,
            "usage_raw": fields.pop("usage_raw", {}),
            "items": items,
            "excluded": fields.pop("excluded", []),
            "manifest_source": fields.pop("manifest_source", "explicit"),
            "budget": fields.pop("budget", None),
            "tool_calls": fields.pop("tool_calls", []),
            "tool_definitions": fields.pop("tool_definitions", None),
            "contents": contents or {},
            **fields,
        }
    )


def analyse(calls, state=None, config=None):
    """Analyse calls in order: the list of analyses (as dicts) and the final state."""
    state = state or new_state()
    results = []
    for entry in calls:
        analysis, state = analyse_call(state, entry, config) if config else analyse_call(state, entry)
        results.append(analysis.to_dict())
    return results, state


def findings_of(results, finding_type: str) -> list[dict]:
    return [
        finding for result in results for finding in result["findings"] if finding["type"] == finding_type
    ]


def json_roundtrip(value):
    return json.loads(json.dumps(value))
