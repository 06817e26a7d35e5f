"""Model calls, runs and turns from stored spans and log records.

Runs a batch task's second half: interpret the batch's spans (``normalise``), write calls and their
content once, and number the calls of each touched run. A run's row is locked while its calls are
written and numbered, so two workers never interleave on one run; runs are locked in id order, so
they never deadlock.
"""

import hashlib
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from django.db import connection
from django.db.models import Q

from ingest import agent_sessions, families, itemlists, normalise, tokens
from ingest.analyse import ANALYSIS_FIELDS, analyse_appended, invalidate
from ingest.bulk import insert_rows
from ingest.models import Call, Content, LogRecord, Operation, Run
from ingest.normalise import CallRecord, Event
from ingest.turns import TurnState, advance

logger = logging.getLogger(__name__)

# Log events that carry a call's content (the legacy span events are read from the span itself).
CONTENT_LOG_EVENTS = families.CONTENT_LOG_EVENTS

_token_cache: dict[str, int] = {}
_TOKEN_CACHE_SIZE = 200_000


def count_tokens(content_hash: str, text: str) -> int:
    """Token estimate, cached by content hash: a run resends its history, so most items repeat."""
    cached = _token_cache.get(content_hash)
    if cached is None:
        if len(_token_cache) >= _TOKEN_CACHE_SIZE:
            _token_cache.clear()
        cached = _token_cache[content_hash] = tokens.count(text)
    return cached


def _datetime(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)


# --- Interpreting a batch of spans ---------------------------------------------------------------


def interpret_spans(
    project_id: int, rows: list[tuple[dict, dict]], keep_content: bool = True
) -> tuple[list[CallRecord], list[dict]]:
    """Call records and operations of a batch; model-call span rows lose the content now kept as items.

    Without ``keep_content`` (a hash-only project) every span row loses all its content."""
    kinds = [normalise.classify(row["name"], row["attributes"]) for _, row in rows]
    call_keys = [
        (row["trace_id"], row["span_id"])
        for (_, row), kind in zip(rows, kinds, strict=True)
        if kind == normalise.MODEL_CALL
    ]
    lock_traces(project_id, {trace_id for trace_id, _ in call_keys})
    events = _content_events(project_id, call_keys)
    records: list[CallRecord] = []
    operations: list[dict] = []
    for (resource, row), kind in zip(rows, kinds, strict=True):
        if kind == normalise.MODEL_CALL:
            record = normalise.call_record(
                row, resource, events.get((row["trace_id"], row["span_id"]), []), count_tokens
            )
            row["attributes"] = normalise.without_content(row["attributes"], record.moved_keys)
            records.append(record)
        elif kind in (normalise.TOOL, normalise.AGENT):
            operations.append(normalise.operation_record(row, kind))
    if not keep_content:
        for index, (resource, row) in enumerate(rows):
            rows[index] = (resource, normalise.without_any_content(row))
        _forget_event_content(project_id, call_keys)
    return records, operations


def lock_traces(project_id: int, trace_ids: Iterable[str]) -> None:
    """Take, until the transaction ends, a lock per trace on joining calls and their content log records.

    A span batch looks for its calls' log records and a log batch for its records' calls: run at the same
    time, each misses the other's uncommitted rows and the content is never joined. With the lock the
    second waits for the first to commit, and then sees its rows. Locks are taken in one sorted sweep, so
    two batches never deadlock on them (both take them before any run's row lock)."""
    if connection.vendor != "postgresql" or not trace_ids:
        return
    keys = sorted({_lock_key(project_id, trace_id) for trace_id in trace_ids})
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_advisory_xact_lock(key)) FROM unnest(%s::bigint[]) AS key", [keys])


def _lock_key(project_id: int, trace_id: str) -> int:
    digest = hashlib.blake2b(f"content-join:{project_id}:{trace_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _forget_event_content(project_id: int, keys: list[tuple[str, str]]) -> None:
    """Hash-only: content log records that a call has used keep their ids and times, not their content."""
    if keys:
        LogRecord.objects.filter(
            project_id=project_id,
            trace_id__in={trace for trace, _ in keys},
            span_id__in={span for _, span in keys},
            event_name__in=CONTENT_LOG_EVENTS,
        ).update(body=None, attributes={"ctxview.content_dropped": True})


def _content_events(project_id: int, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[Event]]:
    """Content log records already stored for these spans (they may arrive before their span)."""
    if not keys:
        return {}
    found: dict[tuple[str, str], list[Event]] = defaultdict(list)
    wanted = set(keys)
    records = (
        LogRecord.objects.filter(
            project_id=project_id,
            trace_id__in={trace_id for trace_id, _ in keys},
            span_id__in={span_id for _, span_id in keys},
            event_name__in=CONTENT_LOG_EVENTS,
        )
        .order_by("time_unix_nano", "observed_time_unix_nano", "id")
        .values_list("trace_id", "span_id", "event_name", "attributes", "body")
    )
    for trace_id, span_id, name, attributes, body in records:
        if (trace_id, span_id) in wanted:
            found[(trace_id, span_id)].append(Event(name, attributes, body))
    return found


# --- Writing calls, contents and operations ------------------------------------------------------


# The fields of a run that ingest writes; the analysis fields belong to the analysis task.
RUN_FIELDS = [field.name for field in Run._meta.concrete_fields if field.name not in ("id", *ANALYSIS_FIELDS)]


def save(
    project_id: int,
    records: list[CallRecord],
    operations: list[dict],
    keep_content: bool = True,
    traces: Iterable[str] = (),
) -> set[int]:
    """Write new calls (a call already stored is left alone) and operations, then number the runs.

    ``traces``: every trace the batch has spans of (any span may link a call to its agent).
    Returns the ids of the runs whose calls changed and are not analysed yet (to be analysed)."""
    traces = {*traces, *(record.trace_id for record in records), *(op["trace_id"] for op in operations)}
    agent_sessions.lock_traces(traces)
    new = _new_records(project_id, records)
    new, replaced = _without_duplicates(project_id, new)
    # The runs of every call that an agent span of these traces may relink are locked with the batch's.
    agent_traces = {op["trace_id"] for op in operations if op["kind"] == normalise.AGENT}
    linked = agent_sessions.runs_of(project_id, agent_traces | agent_sessions.with_agents(project_id, traces))
    runs = _locked_runs(project_id, new, operations, {call.run_id for call in replaced} | linked)
    renumber = _remove_replaced(runs, replaced)
    texts = (
        _save_contents(project_id, [item for record in new for item in record.items]) if keep_content else {}
    )
    Operation.objects.bulk_create(
        [Operation(project_id=project_id, **operation) for operation in operations],
        ignore_conflicts=True,
        batch_size=500,
    )
    renumber |= _renumber_after_late_invocations(project_id, operations)

    # Calls that come after everything their run has are numbered here, before they are inserted (the
    # common case, no UPDATE), and analysed too when the run's analysis is up to date (no task, no
    # reading them back); a run with a late call is renumbered after the insert.
    calls_of: dict[int, list[Call]] = defaultdict(list)
    for record in new:
        run = runs[record.run_key]
        calls_of[run.id].append(_call(project_id, run.id, record))
    # Agents and sessions first: a call of a child run moves to its session's run before it is numbered.
    every_call = [call for calls in calls_of.values() for call in calls]
    renumber |= agent_sessions.resolve(project_id, traces, every_call, runs)
    calls_of = defaultdict(list)
    for call in every_call:
        calls_of[call.run_id].append(call)
    invocations = _agent_invocations(project_id, every_call)
    late_runs, analysed = [], set()
    for run in sorted(runs.values(), key=lambda run: run.id):
        calls = sorted(calls_of[run.id], key=lambda call: (call.start_ns, call.span_id))
        if run.id in renumber or (calls and _before_last(run, calls[0])):
            late_runs.append(run)
        elif calls:
            state = _number(_state_of(run), calls, invocations)
            _remember(run, calls, state, appended=True)
            if analyse_appended(run, calls, texts):
                analysed.add(run.id)
    # A call stored meanwhile by another worker fails the batch (IntegrityError): it is retried, and
    # then sees that call; skipping it would count its usage in the run's totals twice.
    itemlists.store(project_id, every_call)
    insert_rows(Call, [_row(call) for calls in calls_of.values() for call in calls], on_conflict="fail")
    _add_to_totals(runs, every_call)
    for run in runs.values():
        if run in late_runs:
            number_calls(run, renumber=True)
        else:
            run.save(update_fields=RUN_FIELDS + (ANALYSIS_FIELDS if run.id in analysed else []))
    return {run.id for run in runs.values() if run.id not in analysed}


_CALL_COLUMNS = [field.attname for field in Call._meta.concrete_fields if not field.primary_key]


def _row(call: Call) -> dict:
    return {name: getattr(call, name) for name in _CALL_COLUMNS}


# --- One request, two spans ----------------------------------------------------------------------
# The Anthropic SDK (2.x) traces itself whenever a tracer provider is set, so with an instrumentation
# on top every request has two model-call spans: nested (OpenInference's messages.create) or siblings
# with the same response id (OpenLLMetry). Keep one call per request, chosen by a fixed rule so the
# result does not depend on which span arrived first.


def _preference(entry: CallRecord | Call, others: list) -> tuple:
    is_outer = any(other.parent_span_id == entry.span_id for other in others)
    return (not entry.content_captured, not is_outer, entry.start_ns, entry.span_id)


def _without_duplicates(project_id: int, records: list[CallRecord]) -> tuple[list[CallRecord], list[Call]]:
    """New records minus those duplicating another call of their request; stored calls they replace."""
    if not records:
        return records, []
    response_ids = {record.response_id for record in records if record.response_id}
    stored = list(
        Call.objects.filter(
            project_id=project_id, trace_id__in={record.trace_id for record in records}
        ).filter(
            Q(response_id__in=response_ids)
            | Q(span_id__in={record.parent_span_id for record in records if record.parent_span_id})
            | Q(parent_span_id__in={record.span_id for record in records})
            | Q(parent_span_id__in={record.parent_span_id for record in records if record.parent_span_id})
        )
    )
    # In start order, so that which spans join does not depend on which arrived first.
    entries: list[CallRecord | Call] = sorted(
        [*records, *stored], key=lambda entry: (entry.start_ns, entry.span_id)
    )

    def same_request(a, b) -> bool:  # a and b are of the same trace
        if a.response_id and a.response_id == b.response_id:
            return True
        # Nested or twin spans are one request only if nothing says otherwise: parallel calls under one
        # agent can overlap with the same usage, but their responses or their prompts differ.
        if (a.response_id and b.response_id) or _prompts_differ(a, b):
            return False
        return a.parent_span_id == b.span_id or b.parent_span_id == a.span_id or _twins(a, b)

    group_of = list(range(len(entries)))  # union-find over "same request"
    # The response ids in each group: a group never holds two, even through a span that has none.
    response_ids = [{entry.response_id} - {""} for entry in entries]

    def root(index: int) -> int:
        while group_of[index] != index:
            group_of[index] = group_of[group_of[index]]
            index = group_of[index]
        return index

    # Only entries of one trace can be one request: compare within traces (a batch of 512 calls in
    # 11 traces makes 13,000 pairs, not 131,000).
    by_trace: dict[str, list[int]] = defaultdict(list)
    for index, entry in enumerate(entries):
        by_trace[entry.trace_id].append(index)
    for indexes in by_trace.values():
        for position, i in enumerate(indexes):
            for j in indexes[position + 1 :]:
                first, second = root(i), root(j)
                if first == second or len(response_ids[first] | response_ids[second]) > 1:
                    continue
                if same_request(entries[i], entries[j]):
                    group_of[second] = first
                    response_ids[first] |= response_ids[second]
    groups: dict[int, list] = defaultdict(list)
    for index, entry in enumerate(entries):
        groups[root(index)].append(entry)
    keep, replaced = [], []
    for members in groups.values():
        winner = min(members, key=lambda entry: _preference(entry, members))
        losers = [entry.span_id for entry in members if entry is not winner]
        if isinstance(winner, CallRecord):
            if losers:
                note = f"{len(losers)} other span(s) of the same request ignored: {', '.join(losers)}"
                winner = replace(winner, notes=(*winner.notes, note))
            keep.append(winner)
        replaced.extend(entry for entry in members if isinstance(entry, Call) and entry is not winner)
    return keep, replaced


def _usage_of(entry: CallRecord | Call) -> tuple:
    usage = entry.usage.to_dict() if isinstance(entry, CallRecord) else entry.usage_dict()
    return usage["prompt_total"], usage["output"]


def _user_messages(entry: CallRecord | Call) -> tuple[str, ...]:
    """Hashes of the user messages a call sent; empty when its content was not captured."""
    if not entry.content_captured:
        return ()
    if isinstance(entry, CallRecord):
        return tuple(item.hash for item in entry.items if item.kind == "message" and item.role == "user")
    return tuple(
        item["hash"] for item in entry.items if item["kind"] == "message" and item.get("role") == "user"
    )


def _prompts_differ(a: CallRecord | Call, b: CallRecord | Call) -> bool:
    # Instrumentations render system prompts, tools and tool results differently (tests/instrumented/
    # README.md), so two spans of one request differ there; the user messages they agree on.
    first, second = _user_messages(a), _user_messages(b)
    return bool(first and second) and first != second


def _twins(a: CallRecord | Call, b: CallRecord | Call) -> bool:
    """Sibling spans of one request without a response id: same parent, overlapping, same usage."""
    usage = _usage_of(a)
    return (
        bool(a.parent_span_id)
        and a.parent_span_id == b.parent_span_id
        and a.start_ns <= b.end_ns
        and b.start_ns <= a.end_ns
        and None not in usage
        and usage == _usage_of(b)
    )


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
    project_id: int, records: list[CallRecord], operations: list[dict], extra_run_ids: set[int]
) -> dict[str, Run]:
    first_seen: dict[str, CallRecord] = {}
    for record in records:
        first_seen.setdefault(record.run_key, record)
    Run.objects.bulk_create(
        [
            Run(
                project_id=project_id,
                key=key,
                key_source=record.run_key_source,
                service_name=record.service[:200],
                agent_name=record.agent_name,
            )
            for key, record in first_seen.items()
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
                project_id=project_id,
                trace_id__in={trace for trace, _ in parents},
                parent_span_id__in={span for _, span in parents},
            ).values_list("run_id", flat=True)
        )
    locked = (
        Run.objects.select_for_update(of=("self",))
        .select_related("project")  # the analysis reads the project's settings
        .filter(Q(project_id=project_id, key__in=list(first_seen)) | Q(id__in=affected))
    )
    return {run.key: run for run in locked.order_by("id")}


def _new_records(project_id: int, records: list[CallRecord]) -> list[CallRecord]:
    """Records whose call is not stored yet (the same span delivered twice makes one call)."""
    existing = set(
        Call.objects.filter(
            project_id=project_id,
            trace_id__in={record.trace_id for record in records},
            span_id__in={record.span_id for record in records},
        ).values_list("trace_id", "span_id")
    )
    new = {}
    for record in records:
        key = (record.trace_id, record.span_id)
        if key not in existing:
            new.setdefault(key, record)
    return list(new.values())


def _save_contents(project_id: int, items: Iterable[normalise.Item]) -> dict[str, str]:
    """Store each text once per project; returns the texts stored now, by hash."""
    by_hash = {item.hash: item for item in items if item.content is not None}
    if not by_hash:
        return {}
    stored = _stored_hashes(project_id, list(by_hash))
    inserted = insert_rows(
        Content,
        [
            {
                "project_id": project_id,
                "hash": content_hash,
                "text": item.content,
                "truncated": item.content_truncated,
                "tokens": item.tokens if item.tokens_estimated else None,
            }
            for content_hash, item in by_hash.items()
            if content_hash not in stored
        ],
        returning="hash",
    )
    return {content_hash: by_hash[content_hash].content for content_hash in inserted}


def _stored_hashes(project_id: int, hashes: list[str]) -> set[str]:
    """Which of these content hashes the project has stored already."""
    if connection.vendor == "postgresql":
        # One text parameter (hashes are hex): the ORM's IN list of ~1,500 parameters took 10-13 ms.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT hash FROM ingest_content "
                "WHERE project_id = %s AND hash = ANY(string_to_array(%s, ','))",
                [project_id, ",".join(hashes)],
            )
            return {found for (found,) in cursor.fetchall()}
    return set(Content.objects.filter(project_id=project_id, hash__in=hashes).values_list("hash", flat=True))


CALL_CONTENT_FIELDS = (
    "user_fingerprint",
    "usage_raw",
    "notes",
    "content_captured",
    "manifest_source",
    "manifest_error",
    "item_list",
    "excluded",
    "budget",
    "prompt_version",
    "tool_calls",
    "tool_definitions",
)


def _call_fields(record: CallRecord) -> dict:
    return {
        "user_fingerprint": record.user_fingerprint or "",
        "usage_raw": record.usage.raw,
        "notes": list(record.notes),
        "content_captured": record.content_captured,
        "manifest_source": record.manifest_source,
        "manifest_error": record.manifest_error,
        "items": [item.to_dict() for item in record.items],
        "excluded": [dict(entry) for entry in record.excluded],
        "budget": record.budget,
        "prompt_version": record.prompt_version,
        "tool_calls": list(record.tool_calls),
        "tool_definitions": list(record.tool_definitions) if record.tool_definitions is not None else None,
    }


def _call(project_id: int, run_id: int, record: CallRecord) -> Call:
    return Call(
        project_id=project_id,
        run_id=run_id,
        trace_id=record.trace_id,
        span_id=record.span_id,
        parent_span_id=record.parent_span_id,
        turn_hint=record.turn_hint,
        name=record.name,
        start_ns=record.start_ns,
        end_ns=record.end_ns,
        started_at=_datetime(record.start_ns),
        provider=record.provider,
        operation=record.operation,
        request_model=record.request_model,
        response_model=record.response_model,
        response_id=record.response_id,
        agent_name=record.agent_name,
        finish_reasons=list(record.finish_reasons),
        **record.usage.to_dict(),
        **_call_fields(record),
    )


def _add_to_totals(runs: dict[str, Run], calls: list[Call]) -> None:
    by_id = {run.id: run for run in runs.values()}
    for call in calls:
        by_id[call.run_id].count_call(call.usage_dict(), call.model, call.agent_name)


def _renumber_after_late_invocations(project_id: int, operations: list[dict]) -> set[int]:
    """An agent span usually ends, and so arrives, after its calls: their turns may change."""
    agents = [operation for operation in operations if operation["kind"] == "agent"]
    if not agents:
        return set()
    calls = Call.objects.filter(
        project_id=project_id,
        trace_id__in={operation["trace_id"] for operation in agents},
        parent_span_id__in={operation["span_id"] for operation in agents},
        seq__isnull=False,
    )
    run_ids = set(calls.values_list("run_id", flat=True))
    calls.update(seq=None, turn=None)
    return run_ids


# --- Numbering calls -----------------------------------------------------------------------------


def _agent_invocations(project_id: int, calls: list[Call]) -> set[str]:
    """Which of these calls' parent spans are agent invocations."""
    parents = {call.parent_span_id for call in calls if call.parent_span_id}
    if not parents:
        return set()
    return set(
        Operation.objects.filter(
            project_id=project_id,
            kind=Operation.Kind.AGENT,
            trace_id__in={call.trace_id for call in calls},
            span_id__in=parents,
        ).values_list("span_id", flat=True)
    )


def _before_last(run: Run, call: Call) -> bool:
    return run.last_start_ns is not None and (call.start_ns, call.span_id) < (
        run.last_start_ns,
        run.last_span_id,
    )


def _state_of(run: Run) -> TurnState:
    """The carried state after the run's last numbered call."""
    return TurnState(
        run.call_count,
        run.turn_count,
        run.last_fingerprint or None,
        run.last_invocation or None,
        run.last_trace_id or None,
    )


def _state_after(call: Call | None) -> TurnState:
    if call is None:
        return TurnState()
    return TurnState(
        call.seq, call.turn, call.carried_fingerprint or None, call.carried_invocation or None, call.trace_id
    )


def _number(state: TurnState, calls: list[Call], invocations: set[str]) -> TurnState:
    """Give ``calls`` (in order) their seq and turn after ``state``; returns the state after the last."""
    for call in calls:
        # A call inside a tool or a child run (agent_depth > 0) starts no turn: its user message is the
        # parent agent's request, not the user's. Its turn is its root invocation's.
        state = advance(
            state,
            turn_hint=call.turn_hint,
            fingerprint=(call.user_fingerprint or None) if not call.agent_depth else None,
            invocation=call.root_invocation
            or (call.parent_span_id if call.parent_span_id in invocations else None),
            trace_id=call.trace_id,
        )
        call.seq, call.turn = state.seq, state.turn
        call.carried_fingerprint = state.fingerprint or ""
        call.carried_invocation = state.invocation or ""
    return state


def _remember(run: Run, calls: list[Call], state: TurnState, appended: bool) -> None:
    """Keep on the run the state after its last call, so the next call is numbered without reading the run."""
    last = calls[-1]
    turns = max(call.turn for call in calls)
    run.call_count = state.seq
    run.turn_count = max(run.turn_count, turns) if appended else turns
    run.last_start_ns, run.last_span_id = last.start_ns, last.span_id
    run.last_fingerprint = state.fingerprint or ""
    run.last_invocation = state.invocation or ""
    run.last_trace_id = state.trace_id or ""
    run.last_call_at = _datetime(last.start_ns)
    if calls[0].seq == 1:
        run.started_at = _datetime(calls[0].start_ns)


def number_calls(run: Run, renumber: bool = False) -> None:
    """Give the run's unnumbered calls their seq and turn, and save the run; the caller holds its lock.

    Calls that arrive in order are appended using the run's carried state. A call that starts before
    the run's last numbered call renumbers the run from that call on, so the result does not depend
    on the order in which spans arrived. ``renumber``: numbers were reset (a call's content arrived or
    a call was replaced), so renumber from the first unnumbered call whatever its time.
    """
    first = (
        run.calls.filter(seq__isnull=True).order_by("start_ns", "span_id").only("start_ns", "span_id").first()
    )
    if first is None:
        run.save(update_fields=RUN_FIELDS)
        return
    late = renumber or _before_last(run, first)
    if late:
        from_first = Q(start_ns__gt=first.start_ns) | Q(start_ns=first.start_ns, span_id__gte=first.span_id)
        calls = list(run.calls.filter(from_first | Q(seq__isnull=True)).order_by("start_ns", "span_id"))
        previous = (
            run.calls.filter(seq__isnull=False).exclude(from_first).order_by("-start_ns", "-span_id").first()
        )
        state = _state_after(previous)
    else:
        calls = list(run.calls.filter(seq__isnull=True).order_by("start_ns", "span_id"))
        state = _state_of(run)
    state = _number(state, calls, _agent_invocations(run.project_id, calls))
    Call.objects.bulk_update(
        calls, ["seq", "turn", "carried_fingerprint", "carried_invocation"], batch_size=500
    )
    _remember(run, calls, state, appended=not late)
    run.save(update_fields=RUN_FIELDS)
    if late:
        invalidate(run, calls[0].seq)


# --- Content that arrives as log records ---------------------------------------------------------


def join_log_events(project_id: int, rows: list[dict], keep_content: bool = True) -> set[int]:
    """Give calls stored without content the content their log events carry, whenever those arrive.

    Returns the ids of the runs whose calls changed."""
    keys = {
        (row["trace_id"], row["span_id"])
        for row in rows
        if row["span_id"] and row["event_name"] in CONTENT_LOG_EVENTS
    }
    if not keys:
        return set()
    lock_traces(project_id, {trace_id for trace_id, _ in keys})
    candidates = Call.objects.filter(
        project_id=project_id,
        trace_id__in={trace for trace, _ in keys},
        span_id__in={span for _, span in keys},
        content_captured=False,
    ).exclude(manifest_source="explicit")
    calls = [call for call in candidates if (call.trace_id, call.span_id) in keys]
    if not calls:
        return set()
    runs = list(
        Run.objects.select_for_update()
        .defer("analysis_state")
        .filter(id__in={call.run_id for call in calls})
        .order_by("id")
    )
    call_keys = [(call.trace_id, call.span_id) for call in calls]
    events = _content_events(project_id, call_keys)
    spans = _stored_spans(project_id, call_keys)
    items = []
    for call in calls:
        span = spans.get((call.trace_id, call.span_id))
        if span is None:
            continue
        record = normalise.call_record(
            _span_row(span), span.resource.attributes, events[(call.trace_id, call.span_id)], count_tokens
        )
        items.extend(record.items)
        for name, value in _call_fields(record).items():
            setattr(call, name, value)
        # A user message now visible may start a new turn: renumber the run from this call on.
        call.seq = call.turn = None
    if keep_content:
        _save_contents(project_id, items)
    else:
        _forget_event_content(project_id, call_keys)
    itemlists.store(project_id, calls)
    Call.objects.bulk_update(calls, [*CALL_CONTENT_FIELDS, "seq", "turn"], batch_size=200)
    for run in runs:
        number_calls(run, renumber=True)
    return {run.id for run in runs}


def _stored_spans(project_id: int, keys: list[tuple[str, str]]) -> dict:
    from ingest.models import Span

    spans = Span.objects.filter(
        project_id=project_id,
        trace_id__in={trace for trace, _ in keys},
        span_id__in={span for _, span in keys},
    ).select_related("resource")
    return {(span.trace_id, span.span_id): span for span in spans}


def _span_row(span) -> dict:
    """A stored span in the shape ``otlp.spans`` yields, for ``normalise.call_record``."""
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "start_time_unix_nano": span.start_time_unix_nano,
        "end_time_unix_nano": span.end_time_unix_nano,
        "attributes": span.attributes,
        "events": span.events,
        "scope_name": span.scope_name,
        "scope_version": span.scope_version,
    }
