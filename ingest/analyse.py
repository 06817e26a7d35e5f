"""Run the pure analyses (ctxcore.analysis) over a run's stored calls, incrementally.

Calls 1..``run.analysed_seq`` are analysed and ``run.analysis_state`` is the state after the last of
them, so new calls are analysed without reading the run again. Renumbering a run (a late call, content
that arrived later, a replaced duplicate) lowers ``analysed_seq``; the analysis then restarts from the
nearest checkpoint at or below it, so results do not depend on arrival order.
"""

import json
import logging
import zlib

from django.db import transaction
from django.db.models import Q

from ctxcore.analysis import (
    DEFAULT_CONFIG,
    PRICES,
    STATE_SCHEMA,
    AnalysisConfig,
    CallInput,
    OutdatedState,
    analyse_call,
    finalise_run,
    new_state,
    table_from_rows,
)
from ctxcore.vocabulary import Item, ItemReader, evolve
from ingest import locks, rollups
from ingest.bulk import insert_rows, update_rows
from ingest.models import AnalysisCheckpoint, Call, Content, Finding, Run

logger = logging.getLogger(__name__)

CHECKPOINT_EVERY = 32
CHUNK = 100


def pack(state: dict) -> bytes:
    return zlib.compress(json.dumps(state, separators=(",", ":")).encode(), 1)


def unpack(data: bytes | memoryview | None) -> dict | None:
    return json.loads(zlib.decompress(bytes(data))) if data is not None else None


def invalidate(run: Run, from_seq: int) -> None:
    """Calls from ``from_seq`` on changed: their analysis (and checkpoints after it) must be redone."""
    if run.analysed_seq >= from_seq:
        run.analysed_seq, run.analysis_state = from_seq - 1, None
        Run.objects.filter(id=run.id).update(analysed_seq=run.analysed_seq, analysis_state=None)
        AnalysisCheckpoint.objects.filter(run=run, seq__gte=from_seq).delete()
        rollups.withdraw(run.id, from_seq - 1)


def _start(run: Run) -> tuple[int, dict]:
    """The seq after which to continue, and the analysis state at that point."""
    if run.analysed_seq and run.analysis_state is not None:
        return run.analysed_seq, unpack(run.analysis_state)
    checkpoint = (
        AnalysisCheckpoint.objects.filter(run=run, seq__lte=run.analysed_seq).order_by("-seq").first()
        if run.analysed_seq
        else None
    )
    if checkpoint is None:
        return 0, new_state()
    return checkpoint.seq, unpack(checkpoint.state)


# The fields of a stored call that ``call_input`` reads.
CALL_INPUT_FIELDS = (
    "seq turn start_ns end_ns request_model response_model provider uncached cache_write cache_read "
    "output reasoning prompt_total usage_raw item_list excluded manifest_source budget tool_calls "
    "tool_definitions agent_tools agent_name agent_invocation agent_depth"
).split()


def call_input(
    call: Call, contents: dict[str, str] | None = None, read_item: ItemReader | None = None
) -> CallInput:
    """What the analyses read of a stored call (``contents``: hash -> text, where needed; ``read_item``:
    a reader shared by the calls of one chunk, so items they share are read once).

    A call a batch has just derived is read from its Item records, not from their stored dicts again:
    reading them back is what a stored item makes (its content aside, which no analysis reads)."""
    made = call.made_items
    if made is not None:
        read_item = lambda _stored, position: made[position]  # noqa: E731
    return CallInput.from_dict(
        {
            "seq": call.seq,
            "turn": call.turn,
            "start_ns": call.start_ns,
            "end_ns": call.end_ns,
            "model": call.model,
            "provider": call.provider,
            "usage": call.usage_dict(),
            "usage_raw": call.usage_raw,
            "items": call.items,
            "excluded": call.excluded,
            "manifest_source": call.manifest_source,
            "budget": call.budget,
            "tool_calls": call.tool_calls,
            "tool_definitions": call.tool_definitions,
            "agent_tools": call.agent_tools,
            "contents": contents or {},
            "agent": call.agent_name or None,
            # A nested run (a sub-agent entered by a tool, delegation or as a subagent) is its own chain.
            "invocation": (call.agent_invocation or None) if call.agent_depth else None,
        },
        read_item or Item.from_dict,
    )


def _hashes(call: Call) -> set[str]:
    return {item["hash"] for item in call.items}


class ContentCache:
    """Content texts by hash for a run's analysis, fetched a chunk at a time."""

    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        self.texts: dict[str, str] = {}
        self.looked_up: set[str] = set()
        # A recent entry's item hashes, by the id of its list of items: the state carries an entry from
        # call to call as the same object, so its set is built once, not once per later call. Keeping the
        # list keeps its id from being reused while this cache lives (as ctxcore's ItemReader does), so
        # the id alone names it.
        self._hashes_of: dict[int, tuple[list, set[str]]] = {}

    def add(self, texts: dict[str, str]) -> None:
        """Texts known without asking the database (exactly what it holds for these hashes)."""
        self.texts.update(texts)
        self.looked_up |= texts.keys()

    def fetch(self, hashes: set[str]) -> None:
        missing = hashes - self.looked_up
        if missing:
            self.texts.update(Content.objects.by_hash(self.project_id, missing, "text"))
            self.looked_up |= missing

    def contents_for(self, call: Call, state: dict, chain: tuple[str | None, str | None]) -> dict[str, str]:
        """Exactly the texts of the items that differ between the call and its possible references.

        Exactly: giving the analysis more (or less) content than this could change its result, and the
        result must not depend on how the run was split into chunks."""
        mine = _hashes(call)
        wanted: set[str] = set()
        for reference in self._references(state, chain):
            wanted |= mine ^ reference
        self.fetch(wanted)
        return {
            content_hash: self.texts[content_hash] for content_hash in wanted if content_hash in self.texts
        }

    def recent_hashes(self, recent: dict) -> set[str]:
        """The item hashes of a recent entry of the analysis state (read, don't change)."""
        items = recent["items"]
        known = self._hashes_of.get(id(items))
        if known is None:
            known = self._hashes_of[id(items)] = (items, {entry[1] for entry in items})
        return known[1]

    def _references(self, state: dict, chain: tuple[str | None, str | None]) -> list[set[str]]:
        """The item hashes of the calls a cache break of a call of ``chain`` may be measured against: its
        chain's recent calls in the state (each agent, and each nested invocation, has its own chain)."""
        return [
            self.recent_hashes(recent)
            for recent in state.get("recent", [])
            if (recent.get("agent"), recent.get("invocation")) == chain
        ]


def analyse_run(run_id: int) -> int:
    """Analyse the run's calls that are not analysed yet; returns how many were. Safe to run twice."""
    with transaction.atomic():
        locks.begin()
        found = locks.lock_runs(Run.objects.select_related("project").filter(id=run_id))
        run = found[0] if found else None
        if run is None:
            logger.info("run %s is gone; nothing to analyse", run_id)
            return 0
        return catch_up(run)


def catch_up(run: Run) -> int:
    """Analyse the calls of a run that are not analysed yet; the caller holds the run's lock and ``run``
    is as stored (or as the caller is about to store it). Returns how many were analysed."""
    after, state = _start(run)
    try:
        return _analyse_from(run, after, state)
    except OutdatedState:
        # The stored state is from an older version of the analyses: start again from call 1.
        AnalysisCheckpoint.objects.filter(run=run).delete()
        return _analyse_from(run, 0, new_state())


def config_for(project) -> AnalysisConfig:
    """The analysis settings of a project: its own prices over the built-in table."""
    if not project.prices:
        return DEFAULT_CONFIG
    return AnalysisConfig(prices={**PRICES, **table_from_rows(project.prices)})


# The run's fields that the analysis writes (ingest writes the others).
ANALYSIS_FIELDS = ["analysed_seq", "analysis_state", "accounting"]


class AnalysisWrites:
    """What analysing runs writes besides their calls and runs: gathered, then written with one
    statement per table (a batch's runs each wrote their own: a third of a batch's statements)."""

    def __init__(self) -> None:
        self.forgotten: list[tuple[int, int]] = []  # (run id, after): findings to delete first
        self.findings: list[dict] = []
        self.checkpoints: list[AnalysisCheckpoint] = []
        self.rollups = rollups.RollupWrites()  # the monitors' per-minute roll-ups (ingest.rollups)

    def forget_findings_after(self, run: Run, after: int) -> None:
        """Findings of calls after ``after``, and the run-level ones: the analysis writes them anew (and
        the calls' roll-ups)."""
        self.forgotten.append((run.id, after))
        self.rollups.withdraw_after(run.id, after)

    def flush(self) -> None:
        if self.forgotten:
            stale = Q()
            for run_id, after in self.forgotten:
                stale |= Q(run_id=run_id) & (Q(call_seq__gt=after) | Q(call_seq__isnull=True))
            Finding.objects.filter(stale).delete()
        insert_rows(Finding, self.findings, on_conflict="fail")
        AnalysisCheckpoint.objects.bulk_create(
            self.checkpoints, update_conflicts=True, unique_fields=["run", "seq"], update_fields=["state"]
        )
        self.rollups.flush()
        self.forgotten, self.findings, self.checkpoints = [], [], []


def _analyse_from(run: Run, after: int, state: dict) -> int:
    config = config_for(run.project)
    writes = AnalysisWrites()
    writes.forget_findings_after(run, after)
    analysed = 0
    # Only what the analysis reads: the stored analysis it replaces is not unpacked again.
    stored = run.calls.only("run", *CALL_INPUT_FIELDS)
    previous = stored.filter(seq=after).first() if after else None
    calls = stored.filter(seq__gt=after, seq__isnull=False).order_by("seq")
    cache = ContentCache(run.project_id)
    while True:
        chunk = list(calls.filter(seq__gt=after)[:CHUNK])
        if not chunk:
            break
        state = _analyse_chunk(run, chunk, state, previous, cache, config, writes)
        writes.flush()
        update_rows(Call, chunk, ["analysis", "window_total"])
        analysed += len(chunk)
        previous, after = chunk[-1], chunk[-1].seq
    _finish(run, after, state, config, writes)
    writes.flush()
    run.save(update_fields=ANALYSIS_FIELDS)
    return analysed


def analyse_appended(run: Run, calls: list[Call], texts: dict[str, str], writes: AnalysisWrites) -> bool:
    """Analyse calls that a batch appends to a run, before they are stored; False if it cannot.

    The caller holds the run's lock, has numbered ``calls`` (in order, right after the run's last
    call) and stores them with the ``analysis`` set here, then saves the run's ``ANALYSIS_FIELDS``
    and flushes ``writes`` (the findings and checkpoints of every run it analysed so).
    ``texts``: content this batch stored (what the database now holds for those hashes), so they
    are not read back. It cannot when the run's analysis lags behind or its state is from another
    version of the analyses: then nothing is changed and ``analyse_run`` catches the run up."""
    after = calls[0].seq - 1
    if run.analysed_seq != after or (after and run.analysis_state is None):
        return False
    _, state = _start(run)
    if state.get("schema") != STATE_SCHEMA:
        return False
    config = config_for(run.project)
    writes.forget_findings_after(run, after)
    cache = ContentCache(run.project_id)
    cache.add(texts)
    for start in range(0, len(calls), CHUNK):
        state = _analyse_chunk(run, calls[start : start + CHUNK], state, None, cache, config, writes)
    _finish(run, calls[-1].seq, state, config, writes)
    return True


def _analyse_chunk(
    run: Run,
    chunk: list[Call],
    state: dict,
    previous: Call | None,
    cache: ContentCache,
    config,
    writes: AnalysisWrites,
) -> dict:
    """Analyse ``chunk`` (consecutive calls after ``state``), setting each call's ``analysis`` and
    adding its findings and checkpoints to ``writes``; returns the state after the chunk."""
    read_item = ItemReader()
    inputs = [call_input(call, {}, read_item) for call in chunk]
    # Prefetch what the chunk will most likely need (what changes from an agent's call to its next), in
    # one query.
    likely: set[str] = set()
    before: dict[tuple[str | None, str | None], list[set[str]]] = {}
    for recent in state.get("recent", []):
        chain = (recent.get("agent"), recent.get("invocation"))
        before.setdefault(chain, []).append(cache.recent_hashes(recent))
    if previous:
        before.setdefault(call_input(previous, {}).chain, []).append(_hashes(previous))
    for call, entry in zip(chunk, inputs, strict=True):
        mine = _hashes(call)
        for reference in before.get(entry.chain, []):
            likely |= mine ^ reference
        before[entry.chain] = [mine]
    cache.fetch(likely)
    for call, entry in zip(chunk, inputs, strict=True):
        contents = cache.contents_for(call, state, entry.chain)
        result, state = analyse_call(state, evolve(entry, contents=contents), config)
        outcome = result.to_dict()
        call.analysis = {key: outcome[key] for key in ("buckets", "cache", "conflicts")}
        call.window_total = outcome["buckets"].get("total")
        writes.findings += [_finding(run, finding) for finding in outcome["findings"]]
        writes.rollups.add(run, call, entry, outcome, config)
        if call.seq % CHECKPOINT_EVERY == 0:
            writes.checkpoints.append(AnalysisCheckpoint(run=run, seq=call.seq, state=pack(state)))
    return state


def _finish(run: Run, last_seq: int, state: dict, config: AnalysisConfig, writes: AnalysisWrites) -> None:
    """Run-level findings and accounting after the run's last analysed call; the caller saves the run
    and flushes ``writes``."""
    final = finalise_run(state, config)
    writes.findings += [_finding(run, finding) for finding in final["findings"]]
    writes.rollups.add_run_findings(run, final["findings"], run.last_start_ns)
    run.analysed_seq = last_seq
    run.analysis_state = pack(state)
    run.accounting = final["accounting"]


def _finding(run: Run, finding: dict) -> dict:
    """A finding's row (for ``insert_rows``)."""
    return {
        "project_id": run.project_id,
        "run_id": run.id,
        "call_seq": finding.get("call_seq"),
        "type": finding["type"],
        "severity": finding["severity"],
        "item_id": (finding.get("item_id") or "")[:500],
        "cause": finding.get("cause") or "",
        "evidence": finding.get("evidence") or {},
        "fix": finding.get("fix") or "",
    }
