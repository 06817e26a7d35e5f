"""What a call's tokens are spent on, per bucket, reconciled to the billed prompt total."""

from collections.abc import Sequence

from ctxcore.vocabulary import BUCKETS, Item


def _scaled(raw: dict[str, int], total: int) -> dict[str, int]:
    """Shares of ``total`` proportional to ``raw``, as integers that sum exactly to ``total``.

    Largest remainder: floor every share, then give the missing units to the largest remainders
    (ties in bucket order), so the result never depends on float rounding.
    """
    raw_total = sum(raw.values())
    shares = {}
    remainders = []
    for index, bucket in enumerate(BUCKETS):
        share, remainder = divmod(raw[bucket] * total, raw_total)
        shares[bucket] = share
        remainders.append((-remainder, index, bucket))
    for _, _, bucket in sorted(remainders)[: total - sum(shares.values())]:
        shares[bucket] += 1
    return shares


def bucket_tokens(items: Sequence[Item], prompt_total: int | None) -> dict:
    """Tokens per bucket; with a known prompt total, the rest is scaffolding or the buckets scale down."""
    raw = dict.fromkeys(BUCKETS, 0)
    estimated = False
    unknown_items = 0
    for item in items:
        if item.tokens is None:
            unknown_items += 1
            continue
        raw[item.bucket] += item.tokens
        estimated = estimated or item.tokens_estimated
    items_total = sum(raw.values())

    if prompt_total is None:
        parts, scaffolding, scale, total = raw, None, 1.0, items_total
    elif items_total <= prompt_total:
        # Role markers, tool-calling preamble, schema rendering: tokens the items do not account for.
        parts, scaffolding, scale, total = raw, prompt_total - items_total, 1.0, prompt_total
    else:
        parts, scaffolding, total = _scaled(raw, prompt_total), 0, prompt_total
        scale = prompt_total / items_total
    return {
        "parts": {**parts, "scaffolding": scaffolding},
        "total": total,
        "items_total": items_total,
        "prompt_total": prompt_total,
        "reconciled": prompt_total is not None,
        "estimated": estimated,
        "unknown_items": unknown_items,
        "scale": scale,
    }
