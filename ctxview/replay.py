"""Replay a stored run under context policies (``ctxcore.replay``) and follow its probes.

The database side only: load the run's calls as the analyses read them, the project's prices, the
probes (the run's facts and rules, and the ones people added), and which stored content holds each
text or pattern. Regular expressions come from users and content from traces: patterns run through
the ``regex`` package with a time budget, so a pathological one answers "unknown", not a stuck worker.
"""

import hashlib
import time
from collections.abc import Iterable, Sequence

import regex
from django.core.cache import cache

from ctxcore.analysis import CallInput
from ctxcore.replay import Policy, Probe, cheapest_keeping_all, parse, replay, standing_probes, text_hits
from ctxcore.replay.policies import Slot, is_replayed
from ctxcore.replay.probes import MAX_PROBE_LENGTH, PROBE_KINDS
from ctxcore.vocabulary import ItemReader
from ctxview.models import Probe as ProbeRow
from ingest.analyse import CALL_INPUT_FIELDS, call_input, config_for
from ingest.models import Content, Run

MAX_PROBES = 20
# Window items a request may rebuild: a policy rebuilds what changed in its window since the call before
# (``recorded`` every call's whole window), so this grows with the run's stored items, never with their
# square: the demo's 6 default policies rebuild 3,700, and 8 policies on a 1,000-call run 79,000 (the CLI
# has no cap). A policy of several steps rebuilds its whole window on every call.
MAX_REPLAYED_ITEMS = 1_000_000
REGEX_SECONDS = 1.0  # per pattern, over the whole run's content
CONTENT_CHUNK = 2000


class ProbeError(ValueError):
    """A probe that cannot be followed; the message says why."""


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
        try:
            regex.compile(value)
        except (regex.error, OverflowError, RecursionError) as exc:
            raise ProbeError(f"value is not a valid regular expression: {exc}") from None
    return str(kind), value


def run_calls(run: Run, up_to_seq: int | None = None) -> list[CallInput]:
    """The run's numbered calls in order (up to ``up_to_seq``), as the analyses read them (without
    content)."""
    calls = run.calls.filter(seq__isnull=False)
    if up_to_seq is not None:
        calls = calls.filter(seq__lte=up_to_seq)
    read_item = ItemReader()
    return [call_input(call, None, read_item) for call in calls.order_by("seq").only(*CALL_INPUT_FIELDS)]


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


def _contents(project_id: int, hashes: Iterable[str]) -> dict[str, str]:
    wanted = sorted(set(hashes))
    found: dict[str, str] = {}
    for start in range(0, len(wanted), CONTENT_CHUNK):
        found.update(Content.objects.by_hash(project_id, wanted[start : start + CONTENT_CHUNK], "text"))
    return found


def regex_hits(
    pattern: str, contents: dict[str, str], seconds: float = REGEX_SECONDS
) -> frozenset[str] | None:
    """The hashes whose content matches ``pattern`` (case-insensitive); None when it ran out of time."""
    compiled = regex.compile(pattern, regex.IGNORECASE)
    deadline = time.monotonic() + seconds
    found = set()
    for key, text in contents.items():
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            if compiled.search(text, timeout=left):
                found.add(key)
        except TimeoutError:
            return None
    return frozenset(found)


def probe_hits(run: Run, calls: Sequence[CallInput], probes: Sequence[Probe]) -> tuple[dict, str]:
    """Per text or regex probe, the content hashes holding it (None: unknown), and how much content the
    run kept: "all", "partial" or "none" (a run without content cannot say where a text is)."""
    searched = [probe for probe in probes if probe.kind != "item"]
    hashes = {item.hash for call in calls for item in call.items}
    if not hashes:
        return {}, "none"
    contents = _contents(run.project_id, hashes)
    kept = "all" if len(contents) == len(hashes) else "partial" if contents else "none"
    hits: dict = {}
    for probe in searched:
        if kept == "none":
            hits[probe.value] = None
        elif probe.kind == "text":
            hits[probe.value] = text_hits(probe, contents)
        else:
            hits[probe.value] = regex_hits(probe.value, contents)
    return hits, kept


def replay_run(
    run: Run,
    policies: Sequence[Policy],
    at_turn: int | None = None,
    calls: Sequence[CallInput] | None = None,
    keep_windows: Iterable[int] = (),
    limited: bool = True,
    probes_per_call: bool = False,
) -> dict:
    """The replay of a stored run: ``ctxcore.replay.replay`` plus its probes, content and cheapest policy."""
    calls = list(calls) if calls is not None else run_calls(run)
    definitions = run_probes(run, calls)
    probes = [Probe(entry["kind"], entry["value"]) for entry in definitions]
    hits, content = probe_hits(run, calls, probes)
    result = replay(
        calls,
        policies,
        probes,
        hits,
        at_turn=at_turn,
        config=config_for(run.project),
        keep_windows=set(keep_windows),
        max_items=MAX_REPLAYED_ITEMS if limited else None,
        probes_per_call=probes_per_call,
    )
    return {
        **result,
        "content": content,
        "probe_definitions": definitions,
        "cheapest_keeping_all": cheapest_keeping_all(result["policies"]),
    }


def probe_presence(run: Run) -> dict:
    """Where each probe of the run was in each recorded call (the presence map's probe rows): ``probes``
    (their definitions), ``content`` (as ``probe_hits``) and ``calls``: per seq, each probe's place.

    Kept in the cache until the run or its probes change: the presence map is on every overview."""
    added = list(ProbeRow.objects.filter(run=run).order_by("id").values_list("id", "kind", "value"))
    key = (
        f"cv:presence-probes:{run.id}:{run.call_count}:{run.analysed_seq}:{run.updated_at.timestamp()}:"
        + hashlib.sha256(repr(added).encode()).hexdigest()[:16]
    )
    found = cache.get(key)
    if found is None:
        result = replay_run(run, [parse("recorded")], limited=False, probes_per_call=True)
        rows = result["policies"][0]["probes_per_call"]
        found = {
            "probes": result["probe_definitions"],
            "content": result["content"],
            "calls": {row["seq"]: row["places"] for row in rows},
        }
        cache.set(key, found, timeout=600)
    return found


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
