"""Replay a recorded run under context policies: rebuild each call's window, run the prompt-cache model
over the replayed calls, price them and follow the probes. No Django.

Everything but the window is the recording's: the calls' times (so a cache expires where it expired),
models, whether a call asked for caching, its output tokens, and the run's observed token scale (the
recorded prompt total over the recorded items' tokens, per call, so framing scales with the window).
The cache figures come from ctxview's own model (``ctxcore.analysis.cache``) for every policy,
``recorded`` included, so policies are compared by one measure; ``reported`` beside it is what the
provider billed. One pass over the calls serves every policy; the work is linear in the windows' size.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ctxcore.analysis import accounting
from ctxcore.analysis.buckets import bucket_tokens
from ctxcore.analysis.cache import analyse_cache, cumulative_tokens
from ctxcore.analysis.config import DEFAULT_CONFIG, AnalysisConfig
from ctxcore.analysis.inputs import CallInput
from ctxcore.analysis.prices import price_for
from ctxcore.replay.policies import Moment, Policy, Slot
from ctxcore.replay.probes import Place, Probe, locate
from ctxcore.vocabulary import Item, Usage


class Pool:
    """Every item the run has held so far, latest version of each, in render order.

    An item seen for the first time goes right after the item before it in that call (or first), so the
    pool keeps the order the calls rendered (system and tools first, history in the order it grew)."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.latest: dict[str, Item] = {}
        self.turn_of: dict[str, int] = {}
        self.slots: dict[str, Slot] = {}

    def add(self, items: Sequence[Item], turn: int) -> None:
        before: str | None = None
        for item in items:
            if item.id not in self.latest:
                if before is None:
                    self.order.insert(0, item.id)
                elif self.order[-1] == before:
                    self.order.append(item.id)
                else:
                    self.order.insert(self.order.index(before) + 1, item.id)
                self.turn_of[item.id] = item.origin_turn if item.origin_turn is not None else turn
            old = self.latest.get(item.id)
            # Each call's items are new objects: a Slot is made again only for a changed item.
            if old is None or (old.hash, old.mode, old.pinned, old.tokens) != (
                item.hash,
                item.mode,
                item.pinned,
                item.tokens,
            ):
                self.latest[item.id] = item
                self.slots[item.id] = Slot(item)
            before = item.id

    def window(self) -> list[Slot]:
        slots = self.slots
        return [slots[item_id] for item_id in self.order]


class TooMuchWork(ValueError):
    """A replay past its item budget (full-history policies on a long run); the message says which."""


def call_turn(call: CallInput) -> int:
    return call.turn if call.turn is not None else call.seq


def ratio(call: CallInput) -> float:
    """Recorded prompt tokens per item token (framing the items do not count, or a tokenizer's drift)."""
    buckets = bucket_tokens(call.items, call.usage.prompt_total)
    return buckets["total"] / buckets["items_total"] if buckets["items_total"] else 1.0


def _asked_for_caching(call: CallInput) -> bool:
    usage = call.usage
    return (usage.cache_read or 0) > 0 or (usage.cache_write or 0) > 0


@dataclass
class _Track:
    """A probe followed through one policy's calls: where it is now, and where it last left."""

    place: Place = field(default_factory=lambda: Place("absent"))
    holder: str | None = None
    left_at: int | None = None
    reason: str | None = None


@dataclass
class _Run:
    policy: Policy
    recent: list = field(default_factory=list)
    totals: dict = field(default_factory=lambda: dict.fromkeys(
        ("billed_input", "uncached", "cache_write", "cache_read", "output", "breaks", "rewritten"), 0
    ))  # fmt: skip
    cost: float = 0.0
    priced: int = 0
    unpriced: int = 0
    peak: int = 0
    causes: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    tracks: dict = field(default_factory=dict)
    at_query: dict = field(default_factory=dict)


def _simulate_call(
    run: _Run, call: CallInput, window: list[Slot], scale_up: float, config: AnalysisConfig
) -> dict:
    # Positions stay the pool's: the cache model reads only order, ids, hashes, buckets and tokens.
    items = tuple(slot.item for slot in window)
    items_tokens = sum(item.tokens or 0 for item in items)
    total = round(items_tokens * scale_up)
    asked = _asked_for_caching(call)
    one_hour = {key: value for key, value in call.usage_raw.items() if "ephemeral_1h" in key}
    # What the cache model reads of the call: the replayed items, and the recording's wish to cache
    # (not its figures: the provider's reads of the recorded window say nothing about another one).
    asking = Usage(cache_write=1 if asked else 0, prompt_total=total)
    simulated = replace(call, items=items, usage=asking, usage_raw=one_hour)
    # What analyse_cache reads of bucket_tokens(items, total), without splitting into buckets.
    buckets = {"total": total, "scale": total / items_tokens if 0 < total < items_tokens else 1.0}
    price = price_for(call.model, config.prices)
    cache, run.recent = analyse_cache(simulated, run.recent, buckets, price, config.recent_calls)

    read = cache["expected_read"]
    extent = cache["cached_items"]
    extent_tokens = items_tokens if extent == len(items) else cumulative_tokens(items)[extent]
    cached_tokens = round(extent_tokens * buckets["scale"]) if extent else 0
    write = max(0, min(total, cached_tokens) - read) if extent else 0
    usage = Usage(
        uncached=total - read - write,
        cache_write=write,
        cache_read=read,
        output=call.usage.output,
        prompt_total=total,
    )
    cost = accounting.call_cost(replace(simulated, usage=usage), price)
    totals = run.totals
    totals["billed_input"] += total
    totals["uncached"] += usage.uncached or 0
    totals["cache_write"] += write
    totals["cache_read"] += read
    totals["output"] += call.usage.output or 0
    run.peak = max(run.peak, total)
    if cost is None:
        run.unpriced += 1
    else:
        run.priced += 1
        run.cost += cost[0]
    if cache["broke"]:
        totals["breaks"] += 1
        totals["rewritten"] += cache["tokens_rewritten"]
        change = cache["detail"].get("change")
        key = f"{cache['cause']}:{change}" if change else cache["cause"]
        run.causes[key] = run.causes.get(key, 0) + 1
    return {
        "seq": call.seq,
        "turn": call_turn(call),
        "items": len(items),
        "window": total,
        "uncached": usage.uncached,
        "cache_write": write,
        "cache_read": read,
        "output": call.usage.output,
        "cost_usd": round(cost[0], 6) if cost is not None else None,
        "broke": cache["broke"],
        "cause": cache["cause"] if cache["broke"] else None,
        "change": cache["detail"].get("change") if cache["broke"] else None,
    }


def _follow(
    run: _Run,
    call: CallInput,
    window: list[Slot],
    probes: Sequence[Probe],
    hits: Mapping[str, Collection[str] | None],
    at_query: bool,
) -> None:
    reasons = {entry.id: entry.reason for entry in call.excluded}
    for probe in probes:
        track = run.tracks.setdefault(probe, _Track())
        found = hits.get(probe.value) if probe.kind != "item" else None
        place = locate(probe, window, found, with_share=at_query)
        if track.place.present and not place.present:
            track.left_at = call.seq
            if run.policy.spec.startswith("recorded"):
                track.reason = reasons.get(track.holder or "") or "not in the window"
            else:
                track.reason = f"not kept by {run.policy.spec}"
        elif place.present:
            track.left_at = track.reason = None
            track.holder = place.item_id
        track.place = place


def replay(
    calls: Sequence[CallInput],
    policies: Sequence[Policy],
    probes: Sequence[Probe] = (),
    hits: Mapping[str, Collection[str] | None] | None = None,
    at_turn: int | None = None,
    config: AnalysisConfig = DEFAULT_CONFIG,
    keep_windows: Collection[int] = (),
    max_items: int | None = None,
) -> dict:
    """Each policy's calls and totals, and every probe at the query turn (default: the last turn).

    ``calls`` in run order; ``hits``: per text or regex probe, the content hashes that hold it (None:
    the run has no content to search); ``keep_windows``: the seqs whose replayed windows to return;
    ``max_items``: raise ``TooMuchWork`` once the replayed windows hold more items than this."""
    hits = hits or {}
    ordered = sorted(calls, key=lambda call: call.seq)
    last_turn = max((call_turn(call) for call in ordered), default=0)
    query_turn = last_turn if at_turn is None else at_turn
    query_seq = max((call.seq for call in ordered if call_turn(call) <= query_turn), default=None)
    runs = [_Run(policy) for policy in policies]
    windows: dict[str, dict[int, list[Slot]]] = {policy.spec: {} for policy in policies}
    pool = Pool()
    replayed = 0
    needs_pool = any(policy.steps[0].name != "recorded" for policy in policies)
    for call in ordered:
        turn = call_turn(call)
        pool.add(call.items, turn)
        moment = Moment(turn, pool.turn_of, call.items)
        base = pool.window() if needs_pool else []
        scale_up = ratio(call)
        for run in runs:
            window = run.policy.window(base, moment)
            replayed += len(window)
            if max_items is not None and replayed > max_items:
                raise TooMuchWork(
                    f"replaying this run under these policies rebuilds more than {max_items:,} window "
                    f"items (passed at call {call.seq} of {len(ordered)}, policy {run.policy.spec}): "
                    "ask for fewer policies, or ones with a bounded window"
                )
            run.calls.append(_simulate_call(run, call, window, scale_up, config))
            if call.seq <= (query_seq or 0):
                _follow(run, call, window, probes, hits, call.seq == query_seq)
            if call.seq in keep_windows:
                windows[run.policy.spec][call.seq] = window
    return {
        "at_turn": query_turn,
        "query_seq": query_seq,
        "last_turn": last_turn,
        "policies": [_result(run, probes, windows[run.policy.spec]) for run in runs],
    }


def _result(run: _Run, probes: Sequence[Probe], windows: dict[int, list[Slot]]) -> dict:
    totals = run.totals
    billed = totals["billed_input"]
    return {
        "policy": run.policy.spec,
        "calls": len(run.calls),
        "billed_input": billed,
        "uncached": totals["uncached"],
        "cache_write": totals["cache_write"],
        "cache_read": totals["cache_read"],
        "output": totals["output"],
        "cost_usd": round(run.cost, 6) if run.priced else None,
        "unpriced_calls": run.unpriced,
        "cache_hit_rate": round(totals["cache_read"] / billed, 4) if billed else None,
        "cache_breaks": totals["breaks"],
        "tokens_rewritten": totals["rewritten"],
        "breaks_by_cause": dict(sorted(run.causes.items())),
        "peak_window": run.peak,
        "probes": [_probe_result(probe, run.tracks.get(probe)) for probe in probes],
        "per_call": run.calls,
        "windows": windows,
    }


def _probe_result(probe: Probe, track: _Track | None) -> dict:
    place = track.place if track is not None else Place("absent")
    return {
        "probe": probe.label,
        "kind": probe.kind,
        **place.to_dict(),
        "left_at_call": track.left_at if track is not None and not place.present else None,
        "left_reason": track.reason if track is not None and not place.present else None,
    }


def keeps_every_probe(result: Mapping) -> bool:
    """Whether a policy's result has every probe present at the query turn."""
    return all(probe["present"] is True for probe in result["probes"])


def cheapest_keeping_all(results: Sequence[Mapping]) -> str | None:
    """The policy that keeps every probe at the lowest cost (billed input when unpriced), if any."""
    keeping = [result for result in results if result["probes"] and keeps_every_probe(result)]
    if not keeping:
        return None
    best = min(
        keeping,
        key=lambda result: (
            result["cost_usd"] if result["cost_usd"] is not None else float("inf"),
            result["billed_input"],
        ),
    )
    return best["policy"]
