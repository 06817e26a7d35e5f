"""Replay a stored run under context policies (``ctxcore.replay``) and follow its probes.

The database side only: load the run's calls as the analyses read them, the project's prices, the
probes (the run's facts and rules, and the ones people added), and which stored content holds each
text or pattern. Regular expressions come from users and content from traces: patterns run on RE2
(``ingest.redact.compile_own``: linear time, memory bounded per pattern, never kept in a process-wide
cache), and a request's probe search and replay have a time budget: past it the answer is what was
done, marked ``partial``, not a stuck worker. A replay's estimated cost is bounded, each user's
replays are rate limited, and a replay is kept in the cache by the run's version and what was asked.
"""

import hashlib
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Max
from django.db.models.functions import Coalesce

from ctxcore.analysis import CallInput
from ctxcore.replay import (
    Policy,
    Probe,
    TooMuchWork,
    cheapest_keeping_all,
    parse,
    replay,
    replay_cost,
    standing_probes,
    text_hits,
)
from ctxcore.replay.policies import Slot, is_replayed
from ctxcore.replay.probes import MAX_PROBE_LENGTH, PROBE_KINDS, normalise
from ctxcore.vocabulary import ItemReader
from ctxview.models import Probe as ProbeRow
from ctxview.shapes import words
from ctxview.throttle import rate_wait
from ingest.analyse import CALL_INPUT_FIELDS, call_input, config_for
from ingest.models import Content, Run
from ingest.redact import OVERLAP, WINDOW, PatternError, compile_own

MAX_PROBES = 20
# Window items a request may rebuild: a policy rebuilds what changed in its window since the call before
# (``recorded`` every call's whole window), so this grows with the run's stored items, never with their
# square: the demo's 6 default policies rebuild 3,700, and 8 policies on a 1,000-call run 79,000 (the CLI
# has no cap). A policy of several steps rebuilds its whole window on every call.
MAX_REPLAYED_ITEMS = 1_000_000
# A replay's estimated cost above which it is refused before it runs: CTXVIEW_MAX_REPLAY_COST (settings).
# A request's time budget: its text and regex probes over the run's content, then the replay (both
# counted from the request's start). Past it the answer is what was done, marked partial.
PROBE_SEARCH_SECONDS = 2.0
# A request's memory budget, the run's content it reads for its probes: CTXVIEW_MAX_SEARCHED_CHARS.
REPLAY_SECONDS = 6.0
# Replays one user may compute per window: CTXVIEW_REPLAYS_PER_MINUTE.
REPLAY_WINDOW_SECONDS = 60
# Replays one web process computes at once (answers from the cache are not counted): the others are told
# to come back (429) at once instead of holding the process's other threads, which serve other pages.
REPLAYS_AT_ONCE = 1
_computing = threading.BoundedSemaphore(REPLAYS_AT_ONCE)
BUSY_RETRY_SECONDS = 2
# The replays being computed in this process, by cache key, each with an event set when it is done.
_in_flight: dict[str, threading.Event] = {}
_in_flight_lock = threading.Lock()
SAME_REPLAY_WAIT = 1.0
# How long a replay is kept; a partial one shortly (a quieter moment may finish it). Larger answers are
# not kept: the cache is shared by every user (and per process without Redis).
CACHE_SECONDS = 600
PARTIAL_CACHE_SECONDS = 60
MAX_CACHED_BYTES = 2_000_000
CONTENT_CHUNK = 500  # texts a query reads: the memory budget is checked between them


class ProbeError(ValueError):
    """A probe that cannot be followed; the message says why."""


class TooManyReplays(Exception):
    """A user past their replays for the window, or the process busy with another replay; ``wait``:
    the seconds to wait before asking again."""

    def __init__(self, wait: int, busy: bool = False) -> None:
        super().__init__(
            f"the server is computing other replays; try again in {wait} s"
            if busy
            else f"too many replays: at most {replays_per_window()} a user every "
            f"{REPLAY_WINDOW_SECONDS} s; try again in {wait} s"
        )
        self.wait = wait


def replays_per_window() -> int:
    return settings.CTXVIEW_REPLAYS_PER_MINUTE


def max_searched_chars() -> int:
    return settings.CTXVIEW_MAX_SEARCHED_CHARS


def max_replay_cost() -> int:
    return settings.CTXVIEW_MAX_REPLAY_COST


@dataclass
class Budget:
    """A request's deadlines (``time.monotonic``), and what was cut short for them."""

    probes_until: float
    replay_until: float

    @classmethod
    def start(cls) -> "Budget":
        now = time.monotonic()
        return cls(now + PROBE_SEARCH_SECONDS, now + REPLAY_SECONDS)


def compile_probe(value: str):
    """A regex probe compiled by RE2, case-insensitive; ProbeError with RE2's reason when it cannot be."""
    try:
        return compile_own(value, "value is not a valid regular expression", case_sensitive=False)
    except PatternError as exc:
        raise ProbeError(str(exc)) from None


def clean_probe(kind: object, value: object) -> tuple[str, str]:
    """A probe's kind and value as given by a person, checked (a regular expression must compile)."""
    if kind not in PROBE_KINDS:
        raise ProbeError(f"kind must be one of {', '.join(PROBE_KINDS)}")
    if not isinstance(value, str) or not value.strip():
        raise ProbeError("value must be a non-empty string")
    if len(value) > MAX_PROBE_LENGTH:
        raise ProbeError(f"value is longer than {MAX_PROBE_LENGTH} characters")
    if "\x00" in value:
        raise ProbeError("value must not contain NUL characters")
    value = value.strip() if kind != "regex" else value
    if kind == "regex":
        compile_probe(value)
    return str(kind), value


def run_calls(run: Run, up_to_seq: int | None = None) -> list[CallInput]:
    """The run's numbered calls in order (up to ``up_to_seq``), as the analyses read them (without
    content)."""
    calls = run.calls.filter(seq__isnull=False)
    if up_to_seq is not None:
        calls = calls.filter(seq__lte=up_to_seq)
    read_item = ItemReader()
    # "run" too: the related manager sets each call's run from its run id, a query per call if deferred.
    calls = calls.order_by("seq").only("run", *CALL_INPUT_FIELDS)
    return [call_input(call, None, read_item) for call in calls]


@dataclass(frozen=True)
class Turns:
    """A run's numbered calls in figures, without reading them: how many, the last seq and last turn."""

    calls: int
    last_seq: int
    last_turn: int


def run_turns(run: Run) -> Turns:
    figures = run.calls.filter(seq__isnull=False).aggregate(
        calls=Count("id"), last_seq=Max("seq"), last_turn=Max(Coalesce("turn", "seq"))
    )
    return Turns(figures["calls"], figures["last_seq"] or 0, figures["last_turn"] or 0)


def run_probes(run: Run, calls: Sequence[CallInput]) -> list[dict]:
    """The run's probes: its facts and rules first, then the ones people added."""
    standing = standing_probes(item for call in calls for item in call.items)
    rows = list(ProbeRow.objects.filter(run=run).order_by("id"))
    added = {(row.kind, row.value) for row in rows}
    return [
        *(
            {"id": None, "kind": probe.kind, "value": probe.value, "standing": True}
            for probe in standing
            if (probe.kind, probe.value) not in added
        ),
        *(row.to_dict() for row in rows),
    ]


def _contents(project_id: int, hashes: Iterable[str], max_chars: int | None) -> tuple[dict[str, str], bool]:
    """The stored texts among ``hashes``, and whether all were read: reading stops once past
    ``max_chars`` (None: only which hashes have a text, each mapped to "")."""
    wanted = sorted(set(hashes))
    found: dict[str, str] = {}
    total = 0
    for start in range(0, len(wanted), CONTENT_CHUNK):
        chunk = wanted[start : start + CONTENT_CHUNK]
        if max_chars is None:
            found.update((row[0], "") for row in Content.objects.by_hash(project_id, chunk))
            continue
        for key, text in Content.objects.by_hash(project_id, chunk, "text"):
            found[key] = text
            total += len(text)
        if total > max_chars:
            return found, False
    return found, True


def regex_hits(compiled, contents: dict[str, str], until: float) -> frozenset[str] | None:
    """The hashes whose content ``compiled`` (``compile_probe``) matches; None when the time ran out.

    One RE2 search is linear but cannot be interrupted, and a pattern that defeats RE2's DFA searches
    ~20 us a byte: a long text is searched in windows of WINDOW bytes (plus OVERLAP, for a match across
    a cut), the deadline checked between them (so a match longer than OVERLAP across a cut is missed)."""
    found = set()
    for key, text in contents.items():
        # UTF-8 bytes: RE2 reads no other, and a lone surrogate (from JSON escapes) cannot be encoded.
        data = text.encode("utf-8", "replace")
        for offset in range(0, max(len(data), 1), WINDOW):
            if time.monotonic() > until:
                return None
            if compiled.search(data[offset : offset + WINDOW + OVERLAP]) is not None:
                found.add(key)
                break
    return frozenset(found)


@dataclass
class Searched:
    """What ``probe_hits`` found: per text or regex probe the hashes holding it (None: unknown), how
    much content the run kept ("all", "partial", "none"), why a stored probe cannot run, and the probes
    left unknown because the time ran out (or all of them: the content was too much to read)."""

    hits: dict
    content: str
    refused: dict[str, str]
    out_of_time: list[str]
    # The run's content is past CTXVIEW_MAX_SEARCHED_CHARS: text and regex probes unknown.
    too_much: bool = False


def probe_hits(run: Run, calls: Sequence[CallInput], probes: Sequence[Probe], until: float) -> Searched:
    """Each text or regex probe searched in the run's content until ``until`` (``time.monotonic``).

    A stored regex that RE2 refuses (saved before probes ran on RE2, e.g. with a look-around) is
    unknown, with RE2's reason; one compiled pattern is held at a time (RE2's MAX_MEM bounds it)."""
    searched = [probe for probe in probes if probe.kind != "item"]
    hashes = {item.hash for call in calls for item in call.items}
    if not hashes:
        return Searched({}, "none", {}, [])
    # Texts are read only to be searched; past CTXVIEW_MAX_SEARCHED_CHARS the search would hold too much.
    contents, whole = _contents(run.project_id, hashes, max_searched_chars() if searched else None)
    kept = "all" if len(contents) == len(hashes) else "partial" if contents else "none"
    result = Searched({}, kept, {}, [], too_much=not whole)
    normalised: dict[str, str] | None = None
    for probe in searched:
        result.hits[probe.value] = None
        if kept == "none" or not whole:
            continue
        if time.monotonic() > until:
            result.out_of_time.append(probe.value)
        elif probe.kind == "text":
            if normalised is None:  # once for every text probe, not once per probe
                normalised = {key: normalise(text) for key, text in contents.items()}
            result.hits[probe.value] = text_hits(probe, normalised, normalised=True)
        else:
            try:
                compiled = compile_probe(probe.value)
            except ProbeError as exc:
                result.refused[probe.value] = str(exc)
                continue
            result.hits[probe.value] = regex_hits(compiled, contents, until)
            del compiled
            if result.hits[probe.value] is None:
                result.out_of_time.append(probe.value)
    return result


def run_version(run: Run) -> str:
    """What changes whenever the run's calls or analysis do (part of every cache key of a run)."""
    return f"{run.id}:{run.call_count}:{run.analysed_seq}:{run.updated_at.timestamp()}"


def _cache_key(run: Run, calls: Sequence[CallInput] | None, added: Sequence[tuple], *asked: object) -> str:
    """The run's version, the calls replayed (None: all of them), the probes people added (the standing
    ones come from the calls) and what was asked."""
    calls_key = None if calls is None else (len(calls), calls[-1].seq if calls else None)
    digest = hashlib.sha256(repr((calls_key, list(added), asked)).encode()).hexdigest()[:32]
    return f"cv:replay:{run_version(run)}:{digest}"


def _refuse_cost(calls: int, policies: Sequence[Policy], probes: int, exact: bool = True) -> None:
    """TooMuchWork past the cost limit; ``exact``: the run's standing probes are counted (else the
    estimate is a lower bound)."""
    cost = replay_cost(calls, policies, probes)
    if cost > max_replay_cost():
        steps = sum(len(policy.steps) for policy in policies)
        raise TooMuchWork(
            f"this replay's estimated cost is {'' if exact else 'at least '}{cost:,} (calls x policy "
            "steps x (1 + probes) = "
            f"{calls:,} x {steps} x {1 + probes}), over the limit of {max_replay_cost():,}: "
            "ask for fewer or simpler policies, or follow fewer probes"
        )


def _partial(searched: Searched, result: dict) -> list[str]:
    """What the request's budget cut short, as sentences for the page and the API."""
    notes = []
    if searched.too_much:
        notes.append(
            f"the run's content is over the {max_searched_chars():,} characters a probe search reads: "
            "text and regex probes unknown"
        )
    if searched.out_of_time:
        notes.append(
            f"the probe search ran out of its {PROBE_SEARCH_SECONDS:g} s budget: "
            f"{words.counted(len(searched.out_of_time), 'probe')} unknown"
        )
    if result["partial"]:
        notes.append(
            f"the replay ran out of its {REPLAY_SECONDS:g} s budget: it replayed "
            f"{result['partial']['replayed_calls']:,} of {result['partial']['calls']:,} calls"
        )
    return notes


def replay_run(
    run: Run,
    policies: Sequence[Policy],
    at_turn: int | None = None,
    calls: Sequence[CallInput] | None = None,
    keep_windows: Iterable[int] = (),
    limited: bool = True,
    probes_per_call: bool = False,
    rate_name: str | None = None,
    timed: bool | None = None,
) -> dict:
    """The replay of a stored run: ``ctxcore.replay.replay`` plus its probes, content and cheapest policy.

    ``limited``: refuse (``TooMuchWork``) a replay over CTXVIEW_MAX_REPLAY_COST or MAX_REPLAYED_ITEMS and stop
    at the request's time budget (``partial`` says what was cut short; the CLI is not limited);
    ``timed``: stop at the time budget (default: when ``limited``);
    ``rate_name``: count a replay that is not in the cache against that name's rate, and compute it
        only while the process computes no other such replay (``TooManyReplays`` otherwise). The answer
    is kept in the cache by the run's version and what was asked."""
    budget = Budget.start()  # from the request's first query: reading the calls counts too
    # Everything before the replay is read from figures, not from the calls: a refused, cached or
    # rate-limited request costs a few small queries.
    added = list(ProbeRow.objects.filter(run=run).order_by("id").values_list("kind", "value"))
    if limited:  # the standing probes are known once a replay of this version has read the calls
        standing = cache.get(f"cv:standing-probes:{run_version(run)}")
        count = len(calls) if calls is not None else run_turns(run).calls
        _refuse_cost(count, policies, len(added) + (standing or 0), exact=standing is not None)
    specs = [policy.spec for policy in policies]
    asked = (specs, at_turn, sorted(set(keep_windows)), limited, probes_per_call)
    key = _cache_key(run, calls, added, *asked)
    found = cache.get(key)
    if found is not None:
        return pickle.loads(found)

    def compute() -> dict:
        nonlocal calls
        # Counted once the slot is held: a request told the process is busy has cost the user nothing.
        if rate_name is not None:
            wait = rate_wait(f"replay:{rate_name}", replays_per_window(), REPLAY_WINDOW_SECONDS)
            if wait:
                raise TooManyReplays(wait)
        whole_run = calls is None
        calls = list(calls) if calls is not None else run_calls(run)
        definitions = run_probes(run, calls)
        probes = [Probe(entry["kind"], entry["value"]) for entry in definitions]
        if whole_run:
            standing = sum(entry["standing"] for entry in definitions)
            cache.set(f"cv:standing-probes:{run_version(run)}", standing, timeout=CACHE_SECONDS)
        if limited:
            _refuse_cost(len(calls), policies, len(probes))
        asked_for = (at_turn, keep_windows, limited, probes_per_call, limited if timed is None else timed)
        return _compute(run, calls, policies, probes, definitions, key, *asked_for, budget)

    return _alone(key, compute) if rate_name is not None else compute()


def _alone(key: str, compute: Callable[[], dict]) -> dict:
    """``compute()`` holding the process's replay slot. While another request holds it, the same replay
    (same key: ten tabs asking at once) is waited for up to SAME_REPLAY_WAIT and served from the cache;
    any other is TooManyReplays at once."""
    with _in_flight_lock:
        held = _computing.acquire(blocking=False)
        event = _in_flight.setdefault(key, threading.Event()) if held else _in_flight.get(key)
    if not held:
        if event is not None and event.wait(SAME_REPLAY_WAIT):
            found = cache.get(key)
            if found is not None:
                return pickle.loads(found)
        raise TooManyReplays(BUSY_RETRY_SECONDS, busy=True)
    try:
        return compute()
    finally:
        with _in_flight_lock:
            del _in_flight[key]
        event.set()
        _computing.release()


def _compute(
    run: Run,
    calls: list[CallInput],
    policies: Sequence[Policy],
    probes: list[Probe],
    definitions: list[dict],
    key: str,
    at_turn: int | None,
    keep_windows: Iterable[int],
    limited: bool,
    probes_per_call: bool,
    timed: bool,
    budget: Budget,
) -> dict:
    searched = probe_hits(run, calls, probes, budget.probes_until if timed else float("inf"))
    for entry in definitions:
        entry["refused"] = searched.refused.get(entry["value"]) if entry["kind"] == "regex" else None
    result = replay(
        calls,
        policies,
        probes,
        searched.hits,
        at_turn=at_turn,
        config=config_for(run.project),
        keep_windows=set(keep_windows),
        max_items=MAX_REPLAYED_ITEMS if limited else None,
        probes_per_call=probes_per_call,
        deadline=budget.replay_until if timed else None,
    )
    partial = _partial(searched, result)
    answer = {
        **result,
        "partial": partial,
        "content": searched.content,
        "probe_definitions": definitions,
        "cheapest_keeping_all": cheapest_keeping_all(result["policies"]),
    }
    blob = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    if len(blob) <= MAX_CACHED_BYTES:
        cache.set(key, blob, timeout=PARTIAL_CACHE_SECONDS if partial else CACHE_SECONDS)
    return answer


def probe_presence(run: Run) -> dict:
    """Where each probe of the run was in each recorded call (the presence map's probe rows): ``probes``
    (their definitions), ``content`` (as ``probe_hits``), ``partial`` (as ``replay_run``) and ``calls``:
    per seq, each probe's place. Kept in the cache (by ``replay_run``) until the run or its probes change:
    the presence map is on every overview. Within the request's time budget, not the item budget: one
    policy that only reads what each call held."""
    result = replay_run(run, [parse("recorded")], probes_per_call=True, limited=False, timed=True)
    rows = result["policies"][0]["probes_per_call"]
    return {
        "probes": result["probe_definitions"],
        "content": result["content"],
        "partial": result["partial"],
        "calls": {row["seq"]: row["places"] for row in rows},
    }


def window_rows(window: Sequence[Slot]) -> list[dict]:
    """A replayed window's slots as table rows: what each holds and how (a stub or summary a replay made)."""
    return [
        {
            "id": slot.item.id,
            "kind": slot.item.kind,
            "bucket": slot.item.bucket,
            "tokens": slot.item.tokens,
            "how": "summary (unknown contents)"
            if not slot.known
            else "stub"
            if slot.replaces
            else slot.item.mode,
            "made": is_replayed(slot.item),
            "replaces": len(slot.replaces),
        }
        for slot in window
    ]


def policy_window(run: Run, policy: Policy, seq: int) -> dict:
    """The window ``policy`` gives call ``seq`` of the run (the call view's replay): its rows, the call's
    replayed figures, where each probe is in it, and the items the run had held so far that it leaves
    out (neither in it nor stood for by a stub or summary). Only the calls up to ``seq`` are read."""
    calls = run_calls(run, up_to_seq=seq)
    result = replay_run(run, [policy], calls=calls, keep_windows=[seq])
    entry = result["policies"][0]
    window = entry["windows"].get(seq, [])
    held = {slot.item.id for slot in window} | {item.id for slot in window for item in slot.replaces}
    seen = dict.fromkeys(item.id for call in calls for item in call.items)
    return {
        "policy": policy.spec,
        "window": window_rows(window),
        "figures": entry["per_call"][-1] if entry["per_call"] else None,
        "probes": entry["probes"],
        "left_out": [item_id for item_id in seen if item_id not in held],
    }


def turn_probes(run: Run, turn: int) -> list[dict]:
    """Where each probe is at the end of ``turn`` in the recorded run (Explain this turn)."""
    calls = [call for call in run_calls(run) if (call.turn if call.turn is not None else call.seq) <= turn]
    if not calls:
        return []
    result = replay_run(run, [parse("recorded")], turn, calls)
    return result["policies"][0]["probes"]


def last_turn(calls: Sequence[CallInput]) -> int:
    return max((call.turn if call.turn is not None else call.seq for call in calls), default=0)
