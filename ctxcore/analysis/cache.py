"""Prompt-cache analysis of one call against the recent calls of its run.

A call's *reusable prefix* is the longest prefix it shares with a recent call of the same model whose
cache is still alive (and which did cache that far). The *reference* is the recent cached call it
continues: the one sharing its longest prefix (the latest on ties, the same model first). When the
reference had cached further than the call can reuse, the call *broke the cache*: the first item that
differs is the *invalidator*, and the cause is read from that item, the two versions' bytes when known,
the model and the time gap.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ctxcore.analysis import calibration, limits, prefix, textdiff
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
CONTEXT_EDITED = cause_entry("context_edited").name


def cumulative_tokens(items: Sequence[Item]) -> list[int]:
    """``cum[i]`` = tokens of the first ``i`` items (unknown counts as 0)."""
    cum = [0]
    for item in items:
        cum.append(cum[-1] + (item.tokens or 0))
    return cum


class ListWindow:
    """What the cache model reads of a call's items: their chain, prefix sums and last breakpoint.

    The replay passes its own kind (``ctxcore.replay.tree``), which keeps every window of a policy in
    one prefix tree, so a long window costs the cache model no more than what changed in it."""

    def __init__(self, items: Sequence[Item]) -> None:
        self.items = items
        self.chain = prefix.chain(item.hash for item in items)
        self.cum = cumulative_tokens(items)
        breakpoints = [index for index, item in enumerate(items) if item.cache_breakpoint]
        self.last_breakpoint = breakpoints[-1] if breakpoints else None

    def common(self, other_chain: Sequence[str]) -> int:
        """How many leading items this window shares with another window's chain."""
        return prefix.common_prefix_length(self.chain, other_chain)

    def triples(self) -> list[list]:
        return [[item.id, item.hash, item.bucket] for item in self.items]


def cached_extent(call: CallInput, prompt_tokens: int, minimum: int, last_breakpoint: int | None) -> int:
    """How many leading items this call left in the cache: up to its last breakpoint, or all of them."""
    usage = call.usage
    cached = (usage.cache_read or 0) > 0 or (usage.cache_write or 0) > 0
    if not cached and call.provider in limits.AUTOMATIC_CACHING:
        cached = prompt_tokens >= minimum
    if not cached:
        return 0
    return last_breakpoint + 1 if last_breakpoint is not None else len(call.items)


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


def _edited(
    call: CallInput, edits: list[dict], found: tuple, expected_read: int | None, source: Mapping | None
) -> tuple[str | None, str | None, dict, int]:
    """A break on a call whose context was compacted or edited before the model saw it is the edit's.

    A compaction changes the items the trace shows (a rewritten history); the provider's context editing
    clears tool results inside the request, so the trace shows the same prefix and only the reported
    read falls short (of the provider's own count of what it missed, or of what the reference cached by
    report, or of our estimate beyond its error)."""
    cause, invalidator, detail, rewritten = found
    if cause is not None:
        return CONTEXT_EDITED, invalidator, {**detail, "edits": edits, "as_if": cause}, rewritten
    reported = call.usage.cache_read
    if reported is None or not expected_read:
        return None, None, {}, 0
    missed = limits.missed_tokens(call.usage_raw)
    shortfall = expected_read - reported
    bounded = source is not None and source["ceiling"] == expected_read  # the reference's own report
    if missed:
        rewritten = missed
    elif shortfall > 0 and (bounded or calibration.disagree(expected_read, reported)):
        rewritten = shortfall
    else:
        return None, None, {}, 0
    # The provider clears the oldest tool results first: the first of them is where the prefix changed.
    cleared = any(key.startswith("cleared_tool") for edit in edits for key in edit)
    first_result = next((item.id for item in call.items if item.kind == "tool_result"), None)
    detail = {"area": "history", "shortfall": shortfall, "edits": edits}
    return CONTEXT_EDITED, first_result if cleared else None, detail, rewritten


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
    return ours not in theirs


def _chain_of(entry: Mapping) -> tuple[str | None, str | None]:
    return entry["agent"], entry["invocation"]


def _bounded(entries: Sequence[Mapping], per_agent: int, agents: int) -> list[Mapping]:
    """Newest first: at most ``per_agent`` entries of each chain (an agent, or one nested invocation of
    it), of the ``agents`` most recently cached chains."""
    counts: dict[tuple[str | None, str | None], int] = {}
    kept = []
    for entry in entries:
        agent = _chain_of(entry)
        if agent not in counts and len(counts) >= agents:
            continue  # the least recently cached agents go first
        if counts.get(agent, 0) < per_agent:
            counts[agent] = counts.get(agent, 0) + 1
            kept.append(entry)
    return kept


def _ceiling(call: CallInput) -> int | None:
    """The most the provider can have cached from this call, by its own report (None when it says nothing)."""
    usage = call.usage
    if call.provider in limits.AUTOMATIC_CACHING:
        return usage.prompt_total  # writes go unreported: at most the whole prompt
    if usage.cache_read is None or usage.cache_write is None:
        return None
    return usage.cache_read + usage.cache_write or None


def _note(
    call: CallInput, estimate: int, expected: int | None, minimum: int, fit: Mapping | None
) -> str | None:
    """A sentence when our estimate of the read and the provider's reported read disagree (not a finding)."""
    reported = call.usage.cache_read or 0
    if reported <= 0:
        return None
    if estimate == 0:
        return (
            f"The provider reports reading {reported:,} tokens from the cache, but this call shares no "
            "cached prefix with an earlier call that the trace shows (a prefix another agent or another run "
            "of this agent cached, or content the trace leaves out): the reported figure stands."
        )
    if expected is None or not calibration.disagree(expected, reported):
        return None
    below = f" (below this model's minimum of {minimum:,})" if estimate < minimum else ""
    if fit is None:
        basis = "not calibrated yet: no earlier call of this run reported a read"
    else:
        calls = f"{fit['calls']} earlier call{'s' if fit['calls'] != 1 else ''}"
        basis = (
            f"calibrated on {calls} of this run (× {fit['ratio']} + {fit['overhead']:,} tokens), {expected:,}"
        )
    return (
        f"Our estimate of the reused prefix is {estimate:,} tokens{below}, {basis}; the provider reports "
        f"reading {reported:,} tokens, and the reported figure stands. Our counts use another tokenizer "
        "and miss what the provider adds, such as its tool-use preamble."
    )


def analyse_cache(
    call: CallInput,
    recent: Sequence[Mapping],
    buckets: Mapping,
    price: Price | None,
    recent_limit: int,
    agents_kept: int = 8,
    fit: Mapping | None = None,
    window: ListWindow | None = None,
) -> tuple[dict, list[dict]]:
    """Expected vs reported cache reads, the break (cause, invalidator, cost) if any, the new recent list.

    The call is compared only with the recent calls of its own chain (``call.chain``): each agent has its
    own instructions and tools, so its own cache chain, and a handoff is never a break; each nested
    invocation of an agent (a sub-agent run again by its parent) is a fresh conversation, so a chain of
    its own too, never a break against the agent's earlier invocation. ``fit`` is the
    run's calibration so far (``calibration.fit``): it turns our estimate into the provider's tokens.
    A read the call reports outranks every estimate: no prefix "below the minimum", no "expected 0"
    against it. ``window``: the call's items as the cache model reads them (default: from ``call.items``).
    """
    window = window if window is not None else ListWindow(call.items)
    scale = buckets["scale"]
    minimum = limits.minimum_cacheable(call.model)
    one_hour = limits.uses_one_hour_cache(call.usage_raw)
    diagnosis = limits.provider_diagnosis(call.usage_raw)
    reported_read = call.usage.cache_read

    own = [entry for entry in recent if _chain_of(entry) == call.chain]
    shared = [(entry, window.common(entry["chain"])) for entry in own]
    reuse = _reuse(call, shared, window, scale, fit)
    if (reported_read or 0) > 0:
        expected_read = reuse.prefix_tokens if reuse.tokens > 0 else None  # no estimate to set against it
    else:
        expected_read = reuse.prefix_tokens if reuse.proven or reuse.prefix_tokens >= minimum else 0
    same_model = [(entry, length) for entry, length in shared if entry["model"] == call.model]
    reference, reference_shared = max(
        same_model or shared, key=lambda pair: (pair[1], pair[0]["seq"]), default=(None, 0)
    )
    cause, invalidator, detail, rewritten = _cause(call, reference, reference_shared, reuse, expected_read)
    # The minimum table is a hint for calls that report nothing cached: a reported read or write says
    # the provider did cache, whatever our count of the prefix.
    cached_by_report = (reported_read or 0) > 0 or (call.usage.cache_write or 0) > 0
    if cause is None and not cached_by_report:
        cause, invalidator, detail = _below_minimum(call, window, reference, reuse, minimum, scale, fit)

    extent = cached_extent(call, buckets["total"], minimum, window.last_breakpoint)
    broke = cause not in (None, BELOW_MINIMUM)
    result = {
        "expected_read": expected_read,
        "reported_read": reported_read,
        "reusable_items": reuse.items,
        "reusable_tokens": reuse.tokens,
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
        "calibration": dict(fit) if fit is not None else None,
        "calibration_note": None
        if cause in (INVISIBLE, CONTEXT_EDITED)
        else _note(call, reuse.tokens, expected_read, minimum, fit),
    }
    recent_after = _recent_after(call, recent, window, extent, scale, one_hour)
    return result, _bounded(recent_after, recent_limit, agents_kept)


@dataclass(frozen=True)
class _Reuse:
    """What a call could reuse of its chain's live cached prefixes."""

    source: Mapping | None  # the recent call whose cached prefix it shares most of
    items: int  # how many of its first items
    tokens: int  # our count of them
    prefix_tokens: int  # in the provider's tokens, never more than the provider said it cached then
    proven: bool  # the provider's report on the source proves that prefix long enough to cache


def _reuse(
    call: CallInput, shared: list[tuple[Mapping, int]], window: ListWindow, scale: float, fit: Mapping | None
) -> _Reuse:
    live = [
        (entry, min(length, entry["extent"]))
        for entry, length in shared
        if entry["model"] == call.model and call.start_ns - entry["end_ns"] <= entry["ttl_ns"]
    ]
    source, reusable = max(live, key=lambda pair: (pair[1], pair[0]["seq"]), default=(None, 0))
    reusable_tokens = round(window.cum[reusable] * scale)
    prefix_tokens = calibration.calibrated(reusable_tokens, fit)
    if source is not None and source["ceiling"] is not None:
        prefix_tokens = min(prefix_tokens, source["ceiling"])
    # The provider caches nothing below the model's minimum, so a cache it reported on the source call
    # proves that prefix long enough, whatever our count says (a shorter part of it proves nothing).
    proven = source is not None and source["proven"] and reusable == source["extent"]
    return _Reuse(source, reusable, reusable_tokens, prefix_tokens, proven)


def _cause(
    call: CallInput,
    reference: Mapping | None,
    reference_shared: int,
    reuse: _Reuse,
    expected_read: int | None,
) -> tuple[str | None, str | None, dict, int]:
    """Why the call reused less than its reference (the chain's call it shares most with) had cached: the
    cause, the item that broke the prefix, the detail and the tokens written again; or no break."""
    cause = invalidator = None
    detail: dict = {}
    rewritten = 0
    reported_read = call.usage.cache_read
    if reference is not None and reference["extent"] > reuse.items:
        gap_ns = call.start_ns - reference["end_ns"]
        cause, invalidator, detail = classify(call, reference, reference_shared, gap_ns)
        ref_cum = reference["cum"]
        # The part of the reference's cached prefix this call could not reuse, in the reference's scale
        # (the first ``reuse.items`` items are the same items in both calls).
        lost = ref_cum[reference["extent"]] - ref_cum[min(reuse.items, reference["extent"])]
        rewritten = round(lost * reference["scale"])
    elif reference is not None and reported_read is not None and expected_read:
        shortfall = expected_read - reported_read
        if shortfall > INVISIBLE_SHARE * expected_read and shortfall > INVISIBLE_TOKENS:
            cause, rewritten = INVISIBLE, shortfall
            detail = {"shortfall": shortfall}
    edits = limits.context_edits(call.usage_raw)
    if edits and reference is not None and cause in (None, HISTORY_REWRITTEN, INVISIBLE):
        return _edited(call, edits, (cause, invalidator, detail, rewritten), expected_read, reuse.source)
    return cause, invalidator, detail, rewritten


def _below_minimum(
    call: CallInput,
    window: ListWindow,
    reference: Mapping | None,
    reuse: _Reuse,
    minimum: int,
    scale: float,
    fit: Mapping | None,
) -> tuple[str | None, str | None, dict]:
    """A prefix shorter than the model's minimum, which the provider does not cache: the one it shares
    with its reference, else the one its last cache breakpoint marks."""
    breakpoint = window.last_breakpoint
    if reference is not None and not reuse.proven and 0 < reuse.prefix_tokens < minimum:
        return BELOW_MINIMUM, None, {"prefix_tokens": reuse.prefix_tokens, "minimum": minimum}
    if breakpoint is not None:
        marked = calibration.calibrated(round(window.cum[breakpoint + 1] * scale), fit)
        if 0 < marked < minimum:
            return BELOW_MINIMUM, call.items[breakpoint].id, {"prefix_tokens": marked, "minimum": minimum}
    return None, None, {}


def _recent_after(
    call: CallInput, recent: Sequence[Mapping], window: ListWindow, extent: int, scale: float, one_hour: bool
) -> list[Mapping]:
    """The recent list after this call: its own entry first where it cached anything. Only this chain's
    expired entries leave: another agent's next call must still see its own expired chain to say its
    cache expired (the bound on chains keeps the state small meanwhile)."""
    after = [
        entry
        for entry in recent
        if _chain_of(entry) != call.chain or call.start_ns - entry["end_ns"] <= entry["ttl_ns"]
    ]
    if extent <= 0:
        return after
    entry = {
        "seq": call.seq,
        "agent": call.agent,
        "invocation": call.invocation,
        "model": call.model,
        "end_ns": call.end_ns,
        "ttl_ns": limits.TTL_1H_NS if one_hour else limits.TTL_NS,
        "extent": extent,
        "ceiling": _ceiling(call),
        "proven": (call.usage.cache_read or 0) + (call.usage.cache_write or 0) > 0,
        "scale": scale,
        "chain": window.chain,
        "cum": window.cum,
        "items": window.triples(),
    }
    return [entry, *after]
