"""Replay a recorded run under context policies: rebuild each call's window, run the prompt-cache model
over the replayed calls, price them and follow the probes. No Django.

Everything but the window is the recording's: the calls' times (so a cache expires where it expired),
models, whether a call asked for caching, its output tokens, and the run's observed token scale (the
recorded prompt total over the recorded items' tokens, per call, so framing scales with the window).
The cache figures come from ctxview's own model (``ctxcore.analysis.cache``) for every policy,
``recorded`` included, so policies are compared by one measure; ``reported`` beside it is what the
provider billed. One pass over the calls serves every policy; the work is linear in the windows' size.
"""

import copy
import time
from bisect import bisect_left
from collections import ChainMap
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ctxcore.analysis import accounting
from ctxcore.analysis.buckets import bucket_tokens
from ctxcore.analysis.cache import ListWindow, analyse_cache
from ctxcore.analysis.config import DEFAULT_CONFIG, AnalysisConfig
from ctxcore.analysis.inputs import CallInput
from ctxcore.analysis.prices import price_for
from ctxcore.replay.policies import Moment, Policy, Slot, is_history, is_pinned
from ctxcore.replay.probes import HOW, Place, Probe, holds, how_held, locate
from ctxcore.replay.tree import Node, Tree, TreeWindow, cache_key, item_key
from ctxcore.vocabulary import Item, Usage


class Pool:
    """Every item the run has held so far, latest version of each, in render order.

    An item seen for the first time goes right after the item before it in that call (or first), so the
    pool keeps the order the calls rendered (system and tools first, history in the order it grew).
    ``add`` says where the pool first changed, so that a policy rebuilds only its windows' tails."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []
        self.index: dict[str, int] = {}
        self.turn_of: dict[str, int] = {}
        # While history turns never go down in pool order: each turn and its first history item's index.
        self.ordered = True
        self.turns: list[int] = []
        self.turn_starts: list[int] = []

    def add(self, items: Sequence[Item], turn: int) -> int:
        """Adds a call's items; returns the first index that changed (the old length when none did)."""
        changed = len(self.slots)
        before: str | None = None
        for item in items:
            at = self.index.get(item.id)
            if at is None:
                self.turn_of[item.id] = item.origin_turn if item.origin_turn is not None else turn
                at = 0 if before is None else self.index[before] + 1
                if at == len(self.slots):
                    self.slots.append(Slot(item))
                    self.index[item.id] = at
                    self._note_turn(item, at)
                else:  # inserted between items already held: rare, and it renumbers what follows
                    self.slots.insert(at, Slot(item))
                    self._renumber()
                changed = min(changed, at)
            else:
                old = self.slots[at].item
                # Each call's items are new objects: a Slot is made again only for a changed item.
                if (old.hash, old.mode, old.pinned, old.tokens) != (
                    item.hash,
                    item.mode,
                    item.pinned,
                    item.tokens,
                ):
                    self.slots[at] = Slot(item)
                    changed = min(changed, at)
            before = item.id
        return changed

    def _note_turn(self, item: Item, at: int) -> None:
        if not is_history(item):
            return
        turn = self.turn_of[item.id]
        if self.turns and turn < self.turns[-1]:
            self.ordered = False
        elif not self.turns or turn > self.turns[-1]:
            self.turns.append(turn)
            self.turn_starts.append(at)

    def _renumber(self) -> None:
        self.index = {slot.item.id: at for at, slot in enumerate(self.slots)}
        self.ordered, self.turns, self.turn_starts = True, [], []
        for at, slot in enumerate(self.slots):
            self._note_turn(slot.item, at)

    def first_history_from(self, turn: int) -> int:
        """The index of the first history item of ``turn`` or later (the length when none); only while
        the pool is ``ordered``."""
        found = bisect_left(self.turns, turn)
        return self.turn_starts[found] if found < len(self.turns) else len(self.slots)

    def window(self) -> list[Slot]:
        return list(self.slots)


class PolicyWindows:
    """One pool policy's windows, call after call: one list that each call cuts where the window first
    changes and extends with the rest, and the same path in the prefix tree (``ctxcore.replay.tree``).

    Where a window first changes comes from the policy's structure: a single-step policy keeps the part
    of its last window made from the pool's items before an index that only the pool's change and the
    turn's boundary move (the history a turn boundary drops or stubs was dropped or stubbed the call
    before, since turns only grow); so each call costs what changed, not the window's length. A change
    deep in the pool, turns going back, a compaction, or a policy of several steps rebuilds the whole
    window (and says so in the count ``advance`` returns)."""

    def __init__(self, policy: Policy, trees: tuple[Tree, Tree]) -> None:
        self.policy = policy
        self.trees = trees
        self.slots: list[Slot] = []
        self.sources: list[int] = []  # per slot, the pool index of the item it shows
        self.nodes: list[Node] = [trees[0].root]  # nodes[i]: the path after the first i slots
        self.named: list[Node] = [trees[1].root]  # the same in the tree by item (``tree.item_key``)
        self.step = policy.steps[0] if len(policy.steps) == 1 else None
        self.turn: int | None = None
        self.pool_size = 0
        self.pinned = 0  # pin_end: how many slots at the end were moved there

    def _restart(self, pool: Pool, changed: int, moment: Moment) -> int | None:
        """The pool index from which the window is rebuilt (None: all of it)."""
        step, previous = self.step, self.turn
        if step is None or previous is None or moment.turn < previous:
            return None
        if step.name in ("full", "turns"):
            return changed
        if step.name == "sliding_window":
            first = next(
                (self.sources[at] for at, slot in enumerate(self.slots) if is_history(slot.item)), changed
            )
            return min(changed, first)
        if not pool.ordered:
            return None
        if step.name in ("last_turns", "user_verbatim", "elide"):
            return min(changed, pool.first_history_from(previous - step.arguments[0] + 1))
        if step.name == "compaction":
            # Before the next boundary the summary stays, and what came after it is kept as it is.
            start = pool.first_history_from(self._summarised(previous) + 1)
            if changed < start:
                return None
            return start if self._summarised(moment.turn) != self._summarised(previous) else changed
        return None

    def _summarised(self, turn: int) -> int:
        """compaction: the last turn the summary covers at ``turn``."""
        every = self.step.arguments[0]  # type: ignore[union-attr]
        return (turn - 1) // every * every

    def _folds(self, moment: Moment) -> bool:
        """Whether this call crosses a compaction's boundary (more history goes into the summary)."""
        if self.step is None or self.step.name != "compaction" or self.turn is None:
            return False
        return self._summarised(moment.turn) != self._summarised(self.turn)

    def advance(self, pool: Pool, changed: int, moment: Moment) -> int:
        """Makes ``slots`` and ``nodes`` this call's window; returns where the last one was cut (what
        was rebuilt is ``slots`` from there on)."""
        pin_end = self.step is not None and self.step.name == "pin_end"
        if pin_end and self.turn is not None and changed == self.pool_size:
            cut, new = self._pin_end_appended(pool.slots[changed:])
        else:
            start = self._restart(pool, changed, moment)
            if start is None:
                cut, new = 0, self.policy.window(pool.slots, moment)
            elif self._folds(moment):
                # The summary so far stands for the history it replaced, which is older than the turn
                # boundary: given the window's start and the pool from there, the step folds what has
                # become old since into a new summary, as it would from the whole pool.
                cut = bisect_left(self.sources, start)
                summaries = {
                    slot.item.id: slot.item.origin_turn for slot in self.slots[:cut] if slot.replaces
                }
                turns = ChainMap(summaries, pool.turn_of) if summaries else pool.turn_of
                given = replace(moment, turn_of=turns)
                cut, new = 0, self.policy.window([*self.slots[:cut], *pool.slots[start:]], given)
            else:
                cut, new = bisect_left(self.sources, start), self.policy.window(pool.slots[start:], moment)
            if pin_end:
                self.pinned = sum(1 for slot in new if is_pinned(slot.item))
        del self.slots[cut:], self.sources[cut:], self.nodes[cut + 1 :], self.named[cut + 1 :]
        index, nodes, named = pool.index, self.nodes, self.named
        child, named_child = self.trees[0].child, self.trees[1].child
        for slot in new:
            self.slots.append(slot)
            # A stub keeps its item's id; a summary stands where the first item it replaced stood.
            self.sources.append(index[(slot.replaces[0] if slot.item.id not in index else slot.item).id])
            nodes.append(child(nodes[-1], slot.item))
            named.append(named_child(named[-1], slot.item))
        self.turn, self.pool_size = moment.turn, len(pool.slots)
        return cut

    def _pin_end_appended(self, appended: Sequence[Slot]) -> tuple[int, list[Slot]]:
        # Unpinned new items go before the pinned block, pinned ones after it.
        kept = len(self.slots) - self.pinned
        moved = [slot for slot in appended if is_pinned(slot.item)]
        self.pinned += len(moved)
        return kept, [*(slot for slot in appended if not is_pinned(slot.item)), *self.slots[kept:], *moved]


class Holdings:
    """Which slots of a policy's current window hold each probe, kept as the window is cut and extended."""

    def __init__(self, probes: Sequence[Probe], hits: Mapping[str, Collection[str] | None]) -> None:
        self.probes = [(probe, hits.get(probe.value) if probe.kind != "item" else None) for probe in probes]
        self.ranks: list[dict[int, int]] = [{} for _ in probes]  # per probe: slot index -> rank in HOW
        self.held: list[tuple[int, ...]] = []  # per slot: the probes it holds
        # The last summary's replaced items, and per probe whether one holds it: a compaction's next
        # summary replaces the same items and more, so only the new ones are searched.
        self.summarised: tuple[Item, ...] = ()
        self.summarised_holds = [False] * len(self.probes)

    def cut(self, at: int) -> None:
        for index in range(at, len(self.held)):
            for number in self.held[index]:
                del self.ranks[number][index]
        del self.held[at:]

    def extend(self, slots: Sequence[Slot]) -> None:
        for slot in slots:
            index, held = len(self.held), []
            in_replaced = self._in_replaced(slot.replaces) if len(slot.replaces) > 1 else None
            for number, (probe, found) in enumerate(self.probes):
                if probe.kind != "item" and found is None:
                    continue
                how = how_held(probe, slot, found, in_replaced[number] if in_replaced else None)
                if how is not None:
                    self.ranks[number][index] = HOW.index(how)
                    held.append(number)
            self.held.append(tuple(held))

    def _in_replaced(self, replaced: tuple[Item, ...]) -> list[bool]:
        known = len(self.summarised)
        if replaced[:known] != self.summarised:
            known, self.summarised_holds = 0, [False] * len(self.probes)
        self.summarised_holds = [
            before
            or (found is not None or probe.kind == "item")
            and any(holds(probe, item, found) for item in replaced[known:])
            for before, (probe, found) in zip(self.summarised_holds, self.probes, strict=True)
        ]
        self.summarised = replaced
        return self.summarised_holds

    def places(self, windows: PolicyWindows, with_share: bool) -> list[Place]:
        """Each probe's best place in the window, as ``probes.locate`` finds it."""
        last = windows.nodes[-1]
        places = []
        for number, (probe, found) in enumerate(self.probes):
            ranks = self.ranks[number]
            if probe.kind != "item" and found is None:
                places.append(Place("unknown"))
                continue
            if not ranks:
                places.append(Place("absent"))
                continue
            index, rank = min(ranks.items(), key=lambda entry: (entry[1], entry[0]))
            share = None
            if with_share:
                by_tokens = last.through > 0 and last.unknown == 0
                share = windows.nodes[index].through / last.through if by_tokens else index / last.depth
            places.append(Place(HOW[rank], windows.slots[index].item.id, share))
        return places


class TooMuchWork(ValueError):
    """A replay past its item budget (full-history policies on a long run); the message says which."""


def replay_cost(calls: int, policies: Sequence[Policy], probes: int) -> int:
    """What a replay is estimated to cost before it runs: calls x policy steps x (1 + probes).

    Every call rebuilds each policy's window through each of its steps (``sliding_window:N+elide:1+
    pin_end`` is three), and every probe is followed through each rebuilt window; the 1 is the window
    itself, so a replay without probes still costs its windows."""
    return calls * sum(len(policy.steps) for policy in policies) * (1 + probes)


def call_turn(call: CallInput) -> int:
    return call.turn if call.turn is not None else call.seq


def query_call(calls: Sequence[CallInput], turn: int) -> int | None:
    """The seq of the query call of ``turn``: the last call up to the end of that turn."""
    return max((call.seq for call in calls if call_turn(call) <= turn), default=None)


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
    windows: "PolicyWindows | None" = None  # None: the policy starts from what each call held
    holdings: "Holdings | None" = None
    prices: dict = field(default_factory=dict)  # model -> its price (or None), looked up once
    places: list = field(default_factory=list)  # (seq, each probe's place), when asked for


def _copy(call: CallInput, **fields) -> CallInput:
    """The call with other fields: ``dataclasses.replace`` without re-running ``__init__``, which costs
    more than the rest of a replayed call."""
    copied = copy.copy(call)
    for name, value in fields.items():
        object.__setattr__(copied, name, value)
    return copied


def _simulate_call(
    run: _Run, call: CallInput, window: ListWindow | TreeWindow, scale_up: float, config: AnalysisConfig
) -> dict:
    # Positions stay the pool's: the cache model reads only order, ids, hashes, buckets and tokens.
    items = window.items
    items_tokens = window.cum[len(items)]
    total = round(items_tokens * scale_up)
    asked = _asked_for_caching(call)
    one_hour = {key: value for key, value in call.usage_raw.items() if "ephemeral_1h" in key}
    # What the cache model reads of the call: the replayed items, and the recording's wish to cache
    # (not its figures: the provider's reads of the recorded window say nothing about another one).
    asking = Usage(cache_write=1 if asked else 0, prompt_total=total)
    simulated = _copy(call, items=items, usage=asking, usage_raw=one_hour)
    # What analyse_cache reads of bucket_tokens(items, total), without splitting into buckets.
    buckets = {"total": total, "scale": total / items_tokens if 0 < total < items_tokens else 1.0}
    price = run.prices.get(call.model, False)
    if price is False:
        price = run.prices[call.model] = price_for(call.model, config.prices)
    cache, run.recent = analyse_cache(
        simulated, run.recent, buckets, price, config.recent_calls, config.agents_kept, window=window
    )

    read = cache["expected_read"]
    extent = cache["cached_items"]
    extent_tokens = window.cum[extent]
    cached_tokens = round(extent_tokens * buckets["scale"]) if extent else 0
    write = max(0, min(total, cached_tokens) - read) if extent else 0
    usage = Usage(
        uncached=total - read - write,
        cache_write=write,
        cache_read=read,
        output=call.usage.output,
        prompt_total=total,
    )
    cost = accounting.call_cost(_copy(simulated, usage=usage), price)
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


def _follow(run: _Run, call: CallInput, probes: Sequence[Probe], places: Sequence[Place]) -> None:
    reasons = {entry.id: entry.reason for entry in call.excluded}
    for probe, place in zip(probes, places, strict=True):
        track = run.tracks.setdefault(probe, _Track())
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
    whole_windows: bool = False,
    probes_per_call: bool = False,
    deadline: float | None = None,
) -> dict:
    """Each policy's calls and totals, and every probe at the query turn (default: the last turn).

    ``calls`` in run order; ``hits``: per text or regex probe, the content hashes that hold it (None:
    the run has no content to search); ``keep_windows``: the seqs whose replayed windows to return;
    ``max_items``: raise ``TooMuchWork`` once the replay has rebuilt more window items than this (a
    policy rebuilds what changed in its window since the call before); ``whole_windows``: rebuild
    every window whole from the pool instead (the reference the incremental windows are tested against);
    ``probes_per_call``: each policy's result also says where every probe was at each call up to the
    query turn (``probes_per_call``: ``[{"seq", "places": [Place.to_dict(), ...]}]``); ``deadline``
    (``time.monotonic``): past it the replay stops after the call it is at and answers what it has, its
    ``partial`` saying how many calls of how many it replayed (None when it replayed them all)."""
    hits = hits or {}
    ordered = sorted(calls, key=lambda call: call.seq)
    last_turn = max((call_turn(call) for call in ordered), default=0)
    query_turn = last_turn if at_turn is None else at_turn
    query_seq = query_call(ordered, query_turn)
    runs = [_Run(policy) for policy in policies]
    windows: dict[str, dict[int, list[Slot]]] = {policy.spec: {} for policy in policies}
    pool, trees = Pool(), (Tree(cache_key), Tree(item_key))
    for run in runs:
        # A policy that starts from what each call held rebuilds its (recorded-sized) windows whole.
        if run.policy.steps[0].name != "recorded" and not whole_windows:
            run.windows, run.holdings = PolicyWindows(run.policy, trees), Holdings(probes, hits)
    rebuilt = 0
    partial = None
    for number, call in enumerate(ordered):
        if deadline is not None and number and time.monotonic() > deadline:
            partial = {"replayed_calls": number, "calls": len(ordered), "stopped_before_seq": call.seq}
            break
        turn = call_turn(call)
        changed = pool.add(call.items, turn)
        moment = Moment(turn, pool.turn_of, call.items)
        scale_up = ratio(call)
        following = call.seq <= (query_seq or 0)
        at_query = call.seq == query_seq
        for run in runs:
            if run.windows is None:
                window = run.policy.window(pool.window() if whole_windows else [], moment)
                rebuilt += len(window)
                view: ListWindow | TreeWindow = ListWindow(tuple(slot.item for slot in window))
                places = [
                    locate(probe, window, hits.get(probe.value) if probe.kind != "item" else None, at_query)
                    for probe in probes
                ] if following else []  # fmt: skip
            else:
                cut = run.windows.advance(pool, changed, moment)
                window = run.windows.slots
                rebuilt += len(window) - cut
                run.holdings.cut(cut)
                run.holdings.extend(window[cut:])
                view = TreeWindow(run.windows.nodes[-1], run.windows.named[-1])
                places = run.holdings.places(run.windows, at_query) if following else []
            if max_items is not None and rebuilt > max_items:
                raise TooMuchWork(
                    f"replaying this run under these policies rebuilds more than {max_items:,} window "
                    f"items (passed at call {call.seq} of {len(ordered)}, policy {run.policy.spec}): "
                    "ask for fewer policies, or ones whose windows change less from call to call"
                )
            run.calls.append(_simulate_call(run, call, view, scale_up, config))
            if following:
                _follow(run, call, probes, places)
                if probes_per_call:
                    run.places.append((call.seq, places))
            if call.seq in keep_windows:
                windows[run.policy.spec][call.seq] = list(window)
    return {
        "at_turn": query_turn,
        "query_seq": query_seq,
        "last_turn": last_turn,
        "partial": partial,
        "policies": [
            {
                **_result(run, probes, windows[run.policy.spec]),
                **({"probes_per_call": _places_per_call(run)} if probes_per_call else {}),
            }
            for run in runs
        ],
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


def _places_per_call(run: _Run) -> list[dict]:
    return [{"seq": seq, "places": [place.to_dict() for place in places]} for seq, places in run.places]


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
