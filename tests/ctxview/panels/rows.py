"""Plain rows shaped like ``ctxview.queries`` gives them, for the pure panel tests."""


def buckets(**parts) -> dict:
    full = {
        bucket: 0
        for bucket in (
            "system",
            "tools",
            "conversation",
            "tool_results",
            "retrieved",
            "memory",
            "summary",
            "other",
        )
    }
    full.update(parts)
    full.setdefault("scaffolding", 0)
    total = sum(value for value in full.values() if value)
    return {
        "parts": full,
        "total": total,
        "items_total": total,
        "prompt_total": total,
        "reconciled": True,
        "estimated": False,
        "unknown_items": 0,
        "scale": 1.0,
    }


def series_row(
    seq: int, turn: int, read: int = 0, write: int = 100, uncached: int = 10, broke: bool = False, **extra
):
    prompt = read + write + uncached
    row = {
        "id": 1000 + seq,
        "seq": seq,
        "turn": turn,
        "url": f"/calls/{1000 + seq}/",
        "budget": {"limit": 200_000, "reserved_output": 8_000, "input": None},
        "uncached": uncached,
        "cache_write": write,
        "cache_read": read,
        "output": 50,
        "prompt_total": prompt,
        "buckets": buckets(system=prompt // 2, conversation=prompt - prompt // 2),
        "cache": {
            "expected_read": read,
            "broke": broke,
            "cause": "history_rewritten" if broke else None,
            "invalidator_item_id": "msg:<b>x</b>" if broke else None,
            "tokens_rewritten": 500 if broke else 0,
            "cost_usd": 0.002 if broke else None,
        },
    }
    row.update(extra)
    return row


def item(item_id: str, position: int, tokens: int | None = 10, **fields) -> dict:
    base = {
        "id": item_id,
        "kind": "message",
        "bucket": "conversation",
        "position": position,
        "role": "user",
        "tokens": tokens,
        "tokens_estimated": False,
        "mode": "verbatim",
        "version": None,
        "source": None,
        "trust": None,
        "supersedes": [],
        "pinned": False,
        "origin_turn": None,
        "cache_breakpoint": False,
        "hash": f"h-{item_id}",
    }
    base.update(fields)
    return base
