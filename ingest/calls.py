"""Model calls, runs and operations from a batch's spans: the batch task's second half.

Interpret the batch's spans (``normalise``), keep one call per request (``dedup``), write calls and their
content once (``contents``), and number the calls of each touched run (``numbering``). A run's row is
locked while its calls are written and numbered, so two workers never interleave on one run; runs are
locked in id order, so they never deadlock. A batch interprets its spans before it waits for another
batch of the same traces (``claim_traces``).
"""

import logging
from collections import defaultdict

from django.db.models import Q
from django.utils import timezone

from ingest import agent_sessions, itemlists, locks, normalise, raw_rows, titles
from ingest.analyse import ANALYSIS_FIELDS, analyse_appended, catch_up
from ingest.bulk import insert_rows, update_rows
from ingest.call_rows import Batch, call_row, new_call
from ingest.contents import BatchTokens, save_contents
from ingest.dedup import without_duplicates
from ingest.late_content import content_events, forget_event_content
from ingest.models import Call, Operation, Run
from ingest.numbering import (
    RUN_FIELDS,
    agent_invocations,
    before_last,
    number,
    number_calls,
    remember,
    state_of,
)
from ingest.records import CallRecord
from ingest.work import BatchWork, BuiltCalls

logger = logging.getLogger(__name__)


def share_traces(batch: Batch, traces: set[str]) -> None:
    """The shared locks of the content joins on the batch's traces: taken first, as in every batch."""
    locks.join_traces(batch.project_id, traces, shared=True)


def claim_traces(traces: set[str], wait: bool = True) -> bool:
    """Take the locks on the batch's traces that it holds until it commits, once its spans are
    interpreted and before writing what depends on the rest of each trace; False (``wait`` off) when
    another batch holds one of them.

    A conversation's traces straddle batches, so neighbouring batches share a trace. The second
    interprets its spans (counting tokens included) while the first writes, then waits for the first to
    commit: batches are written in their order. Not waiting (requeueing the batch) wrote a later batch
    first and made the earlier one's calls late, the run renumbered and re-analysed from them: with one
    call per request, every request (200 calls: 54 s against 16 s waiting)."""
    if wait:
        locks.claim_traces(traces)
        return True
    return locks.try_claim_traces(traces)


def interpret_spans(batch: Batch, rows: list[tuple[dict, dict]]) -> tuple[list[CallRecord], list[dict]]:
    """Call records and operations of a batch; model-call span rows lose the content now kept as items.

    In a hash-only project (not ``batch.keep_content``) every span row loses all its content."""
    kinds = [normalise.classify(row["name"], row["attributes"]) for _, row in rows]
    call_keys = [
        (row["trace_id"], row["span_id"])
        for (_, row), kind in zip(rows, kinds, strict=True)
        if kind == normalise.MODEL_CALL
    ]
    locks.join_traces(batch.project_id, {trace_id for trace_id, _ in call_keys}, shared=True)
    events = content_events(batch, call_keys)
    tokens = BatchTokens(batch)
    made: list[tuple[CallRecord, set[str]]] = []
    operations: list[dict] = []
    for (resource, row), kind in zip(rows, kinds, strict=True):
        if kind == normalise.MODEL_CALL:
            counter, asked = tokens.deferred()
            record = normalise.call_record(
                row, resource, events.get((row["trace_id"], row["span_id"]), []), counter
            )
            if not record.carries_request:
                # A span that prepares a request (no messages, usage or response) is no call; the raw
                # span stays stored (issue 33).
                continue
            row["attributes"] = normalise.without_content(row["attributes"], record.moved_keys)
            made.append((record, asked))
        elif kind in (normalise.TOOL, normalise.AGENT):
            operations.append(normalise.operation_record(row, kind))
    counts = tokens.resolve()
    records = [tokens.counted(record, asked, counts) for record, asked in made]
    if not batch.keep_content:
        for index, (resource, row) in enumerate(rows):
            rows[index] = (resource, normalise.without_any_content(row))
        forget_event_content(batch, call_keys)
    return records, operations


def save_texts(batch: Batch, records: list[CallRecord]) -> dict[str, str]:
    """Store the records' texts (each once per project); returns those stored now, by hash.

    Texts depend on no other batch, so a batch stores them before it waits for the others of its traces
    (a text of a call that turns out stored already, or a duplicate, was stored with that call)."""
    if not batch.keep_content:
        return {}
    return save_contents(
        batch, [item for record in records for item in (*record.items, *record.output_items)]
    )


def build_calls(batch: Batch, records: list[CallRecord]) -> BuiltCalls:
    """The records' calls, with no run yet: built before the batch waits for the others of its traces."""
    return {id(record): (record, new_call(batch, None, record)) for record in records}


def _call_of(built: BuiltCalls, batch: Batch, run_id: int, record: CallRecord) -> Call:
    made = built.get(id(record))
    if made is None or made[0] is not record:  # a record that dedup rewrote (its notes): built anew
        return new_call(batch, run_id, record)
    made[1].run_id = run_id
    return made[1]


def interpret(work: BatchWork) -> None:
    work.records, work.operations = interpret_spans(work.batch, work.rows)


def insert_spans(work: BatchWork) -> None:
    """The span rows, once ``interpret`` moved the calls' content out of them."""
    raw_rows.insert_spans(work.raw, work.rows)


def store_texts(work: BatchWork) -> None:
    work.texts = save_texts(work.batch, work.records)


def build(work: BatchWork) -> None:
    work.built = build_calls(work.batch, work.records)


def link_traces(work: BatchWork) -> None:
    """Every trace the part's calls and operations belong to, with a child agent's trace and its
    parent's (linked by a span link), claimed with the batch's."""
    project_id = work.batch.project_id
    traces = {*work.traces, *(r.trace_id for r in work.records), *(op["trace_id"] for op in work.operations)}
    new_agents = {op["trace_id"] for op in work.operations if op["kind"] == normalise.AGENT}
    work.traces = agent_sessions.linked_traces(project_id, traces, new_agents)
    locks.claim_traces(work.traces)


def keep_new(work: BatchWork) -> None:
    """The records whose call is not stored yet, one per request (a better span replaces a stored one)."""
    work.new, work.replaced = without_duplicates(work.batch, _new_records(work.batch, work.records))


def lock_runs(work: BatchWork) -> None:
    """Create the runs written to and lock them, with the runs an agent span of these traces may relink,
    those whose first call's root span this part brings (``retitle``), the runs that a span above
    calls naming no run of their own names, with the runs those calls leave (``agent_sessions.declared``),
    and the runs of stored calls waiting for a response this part brings (``continued_calls``)."""
    project_id = work.batch.project_id
    agent_traces = {op["trace_id"] for op in work.operations if op["kind"] == normalise.AGENT}
    linked = agent_sessions.runs_of(
        project_id, agent_traces | agent_sessions.with_agents(project_id, work.traces)
    )
    work.declared = agent_sessions.declared(project_id, work.traces, work.new)
    for record, keyed in zip(work.new, work.declared.records, strict=True):
        if keyed is not record and id(record) in work.built:  # the call built for it is still the one
            work.built[id(keyed)] = (keyed, work.built[id(record)][1])
    work.new = work.declared.records
    work.untitled = _first_calls_under_new_roots(work)
    extra = {call.run_id for call in work.replaced} | linked | work.untitled | work.declared.sources
    extra |= {run_id for _, run_id in work.waiting}
    work.runs = _locked_runs(work.batch, work.new, work.operations, extra, work.wait, work.declared.runs)


def remove_replaced(work: BatchWork) -> None:
    work.renumber = _remove_replaced(work.runs, work.replaced)


def store_operations(work: BatchWork) -> None:
    Operation.objects.bulk_create(
        [Operation(project_id=work.batch.project_id, **operation) for operation in work.operations],
        ignore_conflicts=True,
        batch_size=500,
    )


def reset_late_invocations(work: BatchWork) -> None:
    work.relinked = _renumber_after_late_invocations(work.batch, work.operations)


def resolve_agents(work: BatchWork) -> None:
    """The new calls, each in its run; agents and sessions first: a call of a child run moves to its
    session's run before it is numbered."""
    calls_of: dict[int, list[Call]] = defaultdict(list)
    for record in work.new:
        run_id = work.runs[record.run_key].id
        calls_of[run_id].append(_call_of(work.built, work.batch, run_id, record))
    work.every_call = [call for calls in calls_of.values() for call in calls]
    work.relinked |= agent_sessions.resolve(
        work.batch.project_id, work.traces, work.every_call, work.runs, work.declared
    )
    work.calls_of = defaultdict(list)
    for call in work.every_call:
        work.calls_of[call.run_id].append(call)
    work.invocations = agent_invocations(work.batch.project_id, work.every_call)


def catch_up_relinked(work: BatchWork) -> None:
    """A run whose stored calls this batch relinked (their agent span came after them, as it ends after
    them) is renumbered and its analysis caught up now, before this batch's calls are appended to it
    and analysed in line. After the insert, this batch's calls were renumbered with the stored ones and a
    task read them all back to analyse them (on conversations split over batches: 28% of the calls). A
    run that lost a replaced call is renumbered after the insert, the replacing call with it."""
    for run in work.in_order():
        if run.id in work.relinked and run.id not in work.renumber:
            number_calls(run, renumber=True)
            catch_up(run)


def number_and_analyse(work: BatchWork) -> None:
    """Calls that come after everything their run has are numbered here, before they are inserted (the
    common case, no UPDATE), and analysed too when the run's analysis is up to date (no task, no reading
    them back); a run with a late call is renumbered after the insert."""
    for run in work.in_order():
        calls = sorted(work.calls_of[run.id], key=lambda call: (call.start_ns, call.span_id))
        if run.id in work.renumber or (calls and before_last(run, calls[0])):
            work.late_runs.append(run)
        elif calls:
            state = number(state_of(run), calls, work.invocations)
            remember(run, calls, state, appended=True)
            if analyse_appended(run, calls, work.texts, work.writes):
                work.analysed.add(run.id)


def insert_calls(work: BatchWork) -> None:
    """The item lists, the call rows and the analyses' writes. A call stored meanwhile by another worker
    fails the batch (IntegrityError): it is retried, and then sees that call; skipping it would count its
    usage in the run's totals twice."""
    itemlists.store(work.batch.project_id, work.every_call)
    insert_rows(
        Call, [call_row(call) for calls in work.calls_of.values() for call in calls], on_conflict="fail"
    )
    work.writes.flush()


def add_to_totals(work: BatchWork) -> None:
    by_id = {run.id: run for run in work.runs.values()}
    for call in work.every_call:
        by_id[call.run_id].count_call(call.usage_dict(), call.model, call.agent_name)


def renumber_late(work: BatchWork) -> None:
    for run in work.late_runs:
        number_calls(run, renumber=True)


def save_runs(work: BatchWork) -> None:
    _save_runs([run for run in work.runs.values() if run not in work.late_runs], work.analysed)


def retitle(work: BatchWork) -> None:
    """A run whose first call has a parent takes its title from its trace's root span when nothing else
    gives one; a parent ends, and so arrives, after its calls: the title is made again when it does."""
    for run in work.in_order():
        if run.id in work.untitled and titles.retitle(run):
            Run.objects.filter(id=run.id).update(title=run.title)


def _first_calls_under_new_roots(work: BatchWork) -> set[int]:
    """The runs whose first call is in a trace whose root span (not a call) is in this part."""
    calls = {(record.trace_id, record.span_id) for record in work.records}
    roots = {
        row["trace_id"]
        for _, row in work.rows
        if not row.get("parent_span_id") and (row["trace_id"], row["span_id"]) not in calls
    }
    if not roots:
        return set()
    return set(
        Call.objects.filter(project_id=work.batch.project_id, trace_id__in=roots, seq=1).values_list(
            "run_id", flat=True
        )
    )


def _save_runs(runs: list[Run], analysed: set[int]) -> None:
    """Save the runs' fields (and the analysis's, for those ``analysed``): one statement for each kind,
    not one per run."""
    now = timezone.now()
    for run in runs:
        run.updated_at = now  # what Run.save does for its auto_now field
    update_rows(Run, [run for run in runs if run.id in analysed], RUN_FIELDS + ANALYSIS_FIELDS)
    update_rows(Run, [run for run in runs if run.id not in analysed], RUN_FIELDS)


def _remove_replaced(runs: dict[str, Run], calls: list[Call]) -> set[int]:
    """Delete stored calls that a better span of the same request replaces; returns the runs to renumber."""
    by_id = {run.id: run for run in runs.values()}
    for call in calls:
        run = by_id[call.run_id]
        run.count_call(call.usage_dict(), sign=-1)
        run.calls.filter(start_ns__gte=call.start_ns).update(seq=None, turn=None)
        call.delete()
    return {call.run_id for call in calls}


def _locked_runs(
    batch: Batch,
    records: list[CallRecord],
    operations: list[dict],
    extra_run_ids: set[int],
    wait: bool,
    extra_keys: dict[str, tuple[str, str]] | None = None,
) -> dict[str, Run]:
    """The runs of ``records``, of ``extra_keys`` (key -> (source, service name)) and ``extra_run_ids``,
    created where they are not yet and locked."""
    first_seen: dict[str, CallRecord] = {}
    for record in records:
        first_seen.setdefault(record.run_key, record)
    made = {
        key: (record.run_key_source, record.service, record.agent_name) for key, record in first_seen.items()
    }
    for key, (source, service) in (extra_keys or {}).items():
        made.setdefault(key, (source, service, ""))
    Run.objects.bulk_create(
        [
            Run(
                project_id=batch.project_id,
                key=key,
                key_source=source,
                service_name=service[:200],
                agent_name=agent_name,
            )
            for key, (source, service, agent_name) in made.items()
        ],
        ignore_conflicts=True,
    )
    # Runs whose calls a late agent invocation renumbers are locked here too, all in id order.
    parents = {
        (operation["trace_id"], operation["span_id"])
        for operation in operations
        if operation["kind"] == "agent"
    }
    affected = set(extra_run_ids)
    if parents:
        affected |= set(
            Call.objects.filter(
                project_id=batch.project_id,
                trace_id__in={trace for trace, _ in parents},
                parent_span_id__in={span for _, span in parents},
            ).values_list("run_id", flat=True)
        )
    wanted = Run.objects.select_related("project").filter(  # the analysis reads the project's settings
        Q(project_id=batch.project_id, key__in=list(made)) | Q(id__in=affected)
    )
    return {run.key: run for run in locks.lock_runs(wanted, wait)}


def _new_records(batch: Batch, records: list[CallRecord]) -> list[CallRecord]:
    """Records whose call is not stored yet (the same span delivered twice makes one call)."""
    existing = set(
        Call.objects.filter(
            project_id=batch.project_id,
            trace_id__in={record.trace_id for record in records},
            span_id__any_of={record.span_id for record in records},
        ).values_list("trace_id", "span_id")
    )
    new = {}
    for record in records:
        key = (record.trace_id, record.span_id)
        if key not in existing:
            new.setdefault(key, record)
    return list(new.values())


def _renumber_after_late_invocations(batch: Batch, operations: list[dict]) -> set[int]:
    """An agent span usually ends, and so arrives, after its calls: their turns may change."""
    agents = [operation for operation in operations if operation["kind"] == "agent"]
    if not agents:
        return set()
    calls = Call.objects.filter(
        project_id=batch.project_id,
        trace_id__in={operation["trace_id"] for operation in agents},
        parent_span_id__in={operation["span_id"] for operation in agents},
        seq__isnull=False,
    )
    run_ids = set(calls.values_list("run_id", flat=True))
    calls.update(seq=None, turn=None)
    return run_ids
