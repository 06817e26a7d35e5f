"""Prompt-cache analysis of one call against the recent calls of its run.

A call's *reusable prefix* is the longest prefix it shares with a recent call of the same model whose
cache is still alive (and which did cache that far). The *reference* is the recent cached call it
continues: the one sharing its longest prefix (the latest on ties, the same model first). When the
reference had cached further than the call can reuse, the call *broke the cache*: the first item that
differs is the *invalidator*, and the cause is read from that item, the two versions' bytes when known,
the model and the time gap.
"""

from collections.abc import Mapping, Sequence

from ctxcore.analysis import limits, prefix, textdiff
from ctxcore.analysis.inputs import CallInput
from ctxcore.analysis.prices import Price
from ctxcore.catalogue import CAUSES
from ctxcore.catalogue import cause as cause_entry
from ctxcore.vocabulary import Item

# The invisible invalidator: identical chains, yet the provider read far less than expected.
INVISIBLE_SHARE = 0.2
INVISIBLE_TOKENS = 1024

# Every cause this module names, looked up at import: a cause missing from the catalogue fails here.
MODEL_CHANGED = cause_entry("model_changed").name
TTL_EXPIRED = cause_entry("ttl_expired").name
KEY_ORDER = cause_entry("key_order").name
TOOLS_CHANGED = cause_entry("tools_changed").name
VOLATILE_SYSTEM_PROMPT = cause_entry("volatile_system_prompt").name
SYSTEM_CHANGED = cause_entry("system_changed").name
HISTORY_REWRITTEN = cause_entry("history_rewritten").name
INVISIBLE = cause_entry("invisible").name
BELOW_MINIMUM = cause_entry("below_minimum").name


def cumulative_tokens(items: Sequence[Item]) -> list[int]:
    """``cum[i]`` = tokens of the first ``i`` items (unknown counts as 0)."""
    cum = [0]
    for item in items:
        cum.append(cum[-1] + (item.tokens or 0))
    return cum


def cached_extent(call: CallInput, prompt_tokens: int, minimum: int) -> int:
    """How many leading items this call left in the cache: up to its last breakpoint, or all of them."""
    usage = call.usage
    cached = (usage.cache_read or 0) > 0 or (usage.cache_write or 0) > 0
    if not cached and call.provider in limits.AUTOMATIC_CACHING:
        cached = prompt_tokens >= minimum
    if not cached:
        return 0
    breakpoints = [index for index, item in enumerate(call.items) if item.cache_breakpoint]
    return breakpoints[-1] + 1 if breakpoints else len(call.items)


def _area(bucket: str) -> str:
    return bucket if bucket in ("tools", "system") else "history"


def _tools_detail(call: CallInput, reference: dict, ref_item: list, new_item: Item | None) -> dict:
    old = [(item_id, item_hash) for item_id, item_hash, bucket in reference["items"] if bucket == "tools"]
    new = [(item.id, item.hash) for item in call.items if item.bucket == "tools"]
    old_hashes, new_hashes = dict(old), dict(new)
    added = [item_id for item_id, _ in new if item_id not in old_hashes]
    removed = [item_id for item_id, _ in old if item_id not in new_hashes]
    changed = [item_id for item_id, item_hash in new if old_hashes.get(item_id, item_hash) != item_hash]
    kept_old = [item_id for item_id, _ in old if item_id in new_hashes]
    kept_new = [item_id for item_id, _ in new if item_id in old_hashes]
    if new_item is not None and new_item.bucket == "tools" and new_item.id not in old_hashes:
        change = "added"
    elif ref_item[2] == "tools" and ref_item[0] not in new_hashes:
        change = "removed"
    elif new_item is not None and new_item.id == ref_item[0]:
        change = "schema_changed"
    else:
        change = "reordered"
    return {
        "change": change,
        "added": added,
        "removed": removed,
        "schema_changed": changed,
        "reordered": kept_old != kept_new,
    }


def _history_detail(call: CallInput, reference: dict, ref_item: list, new_item: Item | None) -> dict:
    if new_item is None:
        change = "truncated"  # the call stops where the cached prompt went on
    elif new_item.id == ref_item[0]:
        change = "elided" if new_item.mode != "verbatim" else "edited"
    else:
        new_ids = {item.id for item in call.items}
        old_ids = {entry[0] for entry in reference["items"]}
        if ref_item[0] not in new_ids and new_item.id in old_ids:
            change = "removed"
        elif ref_item[0] in new_ids and new_item.id not in old_ids:
            change = "inserted"
        elif new_item.bucket == "summary" or new_item.mode == "summary":
            change = "compacted"
        else:
            change = "replaced"
    reasons = {entry.id: entry.reason for entry in call.excluded}
    return {
        "change": change,
        "bucket": new_item.bucket if new_item is not None else ref_item[2],
        "removed_item_id": ref_item[0],
        "excluded_reason": reasons.get(ref_item[0]),
    }


def classify(call: CallInput, reference: dict, shared: int, gap_ns: int) -> tuple[str, str | None, dict]:
    """The cause of a break against ``reference``, the invalidating item's id, and the details."""
    if reference["model"] != call.model:
        return MODEL_CHANGED, None, {"from": reference["model"], "to": call.model}
    if gap_ns > reference["ttl_ns"]:
        return TTL_EXPIRED, None, {"gap_s": round(gap_ns / 1e9, 1), "ttl_s": reference["ttl_ns"] // 10**9}

    ref_item = reference["items"][shared]
    new_item = call.items[shared] if shared < len(call.items) else None
    invalidator = new_item.id if new_item is not None else ref_item[0]
    areas = {_area(ref_item[2]), _area(new_item.bucket) if new_item is not None else "history"}
    area = "tools" if "tools" in areas else "system" if "system" in areas else "history"
    detail: dict = {"area": area, "position": shared, "previous_item_id": ref_item[0]}

    old_text = call.contents.get(ref_item[1])
    new_text = call.contents.get(new_item.hash) if new_item is not None else None
    if old_text is not None and new_text is not None:
        detail["bytes"] = textdiff.byte_diff(old_text, new_text)
        if textdiff.same_json_other_order(old_text, new_text):
            return KEY_ORDER, invalidator, detail
    if area == "tools":
        return TOOLS_CHANGED, invalidator, {**detail, **_tools_detail(call, reference, ref_item, new_item)}
    if area == "system":
        volatile = textdiff.volatile_kind(old_text, new_text) if "bytes" in detail else None
        if volatile:
            return VOLATILE_SYSTEM_PROMPT, invalidator, {**detail, "volatile": volatile}
        return SYSTEM_CHANGED, invalidator, detail
    return (
        HISTORY_REWRITTEN,
        invalidator,
        {**detail, **_history_detail(call, reference, ref_item, new_item)},
    )


def _write_price(price: Price | None, one_hour: bool) -> float | None:
    if price is None:
        return None
    return price.cache_write_1h if one_hour else price.cache_write_5m


def _rewrite_cost(tokens: int, price: Price | None, one_hour: bool) -> float | None:
    """What writing ``tokens`` again cost beyond reading them from cache."""
    write = _write_price(price, one_hour)
    if write is None or price is None:
        return None
    return round(tokens * (write - price.cache_read) / 1e6, 6)


def _disagrees(cause: str | None, detail: Mapping, diagnosis: str) -> bool | None:
    """Whether the provider's diagnosis names another part of the request than our cause."""
    theirs = limits.PROVIDER_AREAS.get(diagnosis)
    if theirs is None:
        return None  # a diagnosis that compares nothing ("unavailable", "previous_message_not_found")
    ours = detail.get("area") if cause == KEY_ORDER else CAUSES[cause].area if cause else None
    return ours != theirs


def analyse_cache(
    call: CallInput,
    recent: Sequence[Mapping],
    buckets: Mapping,
    price: Price | None,
    recent_limit: int,
) -> tuple[dict, list[dict]]:
    """Expected vs reported cache reads, the break (cause, invalidator, cost) if any, the new recent list."""
    links = prefix.chain(item.hash for item in call.items)
    cum = cumulative_tokens(call.items)
    scale = buckets["scale"]
    minimum = limits.minimum_cacheable(call.model)
    one_hour = limits.uses_one_hour_cache(call.usage_raw)
    diagnosis = limits.provider_diagnosis(call.usage_raw)

    shared = [(entry, prefix.common_prefix_length(links, entry["chain"])) for entry in recent]
    live = [
        (entry, length)
        for entry, length in shared
        if entry["model"] == call.model and call.start_ns - entry["end_ns"] <= entry["ttl_ns"]
    ]
    reusable = max((min(length, entry["extent"]) for entry, length in live), default=0)
    reusable_tokens = round(cum[reusable] * scale)
    expected_read = reusable_tokens if reusable_tokens >= minimum else 0
    reported_read = call.usage.cache_read

    # The reference is one of this agent's calls: another agent's cache (a subagent's own system
    # prompt and tools, or the main agent's) is no prefix this call was meant to continue.
    mine = [(entry, length) for entry, length in shared if entry.get("agent", "") == call.agent]
    same_model = [(entry, length) for entry, length in mine if entry["model"] == call.model]
    pool = same_model or mine
    reference, reference_shared = max(pool, key=lambda pair: (pair[1], pair[0]["seq"]), default=(None, 0))

    cause = invalidator = None
    detail: dict = {}
    rewritten = 0
    if reference is not None and reference["extent"] > reusable:
        gap_ns = call.start_ns - reference["end_ns"]
        cause, invalidator, detail = classify(call, reference, reference_shared, gap_ns)
        ref_cum = reference["cum"]
        # The part of the reference's cached prefix this call could not reuse, in the reference's scale
        # (the first ``reusable`` items are the same items in both calls).
        lost = ref_cum[reference["extent"]] - ref_cum[min(reusable, reference["extent"])]
        rewritten = round(lost * reference["scale"])
    elif reference is not None and reported_read is not None and expected_read > 0:
        shortfall = expected_read - reported_read
        if shortfall > INVISIBLE_SHARE * expected_read and shortfall > INVISIBLE_TOKENS:
            cause, rewritten = INVISIBLE, shortfall
            detail = {"shortfall": shortfall}
    if cause is None:
        breakpoints = [index for index, item in enumerate(call.items) if item.cache_breakpoint]
        marked = round(cum[breakpoints[-1] + 1] * scale) if breakpoints else 0
        if reference is not None and 0 < reusable_tokens < minimum:
            cause, detail = BELOW_MINIMUM, {"prefix_tokens": reusable_tokens, "minimum": minimum}
        elif breakpoints and 0 < marked < minimum:
            cause, invalidator = BELOW_MINIMUM, call.items[breakpoints[-1]].id
            detail = {"prefix_tokens": marked, "minimum": minimum}

    extent = cached_extent(call, buckets["total"], minimum)
    recent_after = [entry for entry in recent if call.start_ns - entry["end_ns"] <= entry["ttl_ns"]]
    if extent > 0:
        entry = {
            "seq": call.seq,
            "model": call.model,
            "agent": call.agent,
            "end_ns": call.end_ns,
            "ttl_ns": limits.TTL_1H_NS if one_hour else limits.TTL_NS,
            "extent": extent,
            "scale": scale,
            "chain": links,
            "cum": cum,
            "items": [[item.id, item.hash, item.bucket] for item in call.items],
        }
        recent_after = [entry, *recent_after]
    broke = cause not in (None, BELOW_MINIMUM)
    result = {
        "expected_read": expected_read,
        "reported_read": reported_read,
        "reusable_items": reusable,
        "reusable_tokens": reusable_tokens,
        "minimum": minimum,
        "cached_items": extent,
        "reference_seq": reference["seq"] if reference is not None else None,
        "broke": broke,
        "cause": cause,
        "invalidator_item_id": invalidator,
        "detail": detail,
        "tokens_rewritten": rewritten,
        "cost_usd": _rewrite_cost(rewritten, price, one_hour) if broke else None,
        "provider_diagnosis": diagnosis,
        "disagrees": _disagrees(cause, detail, diagnosis) if diagnosis else None,
    }
    return result, recent_after[:recent_limit]
