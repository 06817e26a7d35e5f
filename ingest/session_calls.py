"""The coding CLIs' calls: reassemble every session a batch touched from all its stored rows.

A CLI's call may be born from a log record (Claude Code's default, Codex) and completed by a span, or
the other way round; its window may depend on earlier requests. So each touched session is assembled
anew from every stored span and log record of it (``ingest.sessions``), and the run's calls of that
family are made exactly the assembled ones: unchanged calls stay, changed or vanished ones are
replaced, and the run is renumbered and reanalysed from the first change. The run's row is locked
before the rows are read, so two workers on one session see each other's committed rows.

Only calls that end after the batch's earliest row (less ``SLACK_NS``) are made again and compared: a
row changes its own request's call (a log record is written as its request ends, a span when it ends,
a prompt or a system prompt before the requests that follow) and the calls after it, never calls that
ended long before it. So a batch costs what its recent calls cost, not what the whole session does.
"""

from dataclasses import dataclass

from django.db.models import Q

from ingest import itemlists, locks, sessions, titles
from ingest.analyse import invalidate
from ingest.call_rows import CALL_COLUMNS, Batch, new_call
from ingest.contents import count_tokens, save_contents
from ingest.families import SESSION_FAMILIES, Family
from ingest.late_content import stored_span_row
from ingest.models import Call, LogRecord, Run, Span
from ingest.numbering import number_calls
from ingest.records import CallRecord

# How much earlier than a row a call it changes may end: a log record written after its request's span
# ended, clocks of one CLI process. Generous: it only bounds the work, never the result.
SLACK_NS = 60 * 10**9


@dataclass(frozen=True)
class _Session:
    family: Family
    key: str
    earliest_ns: int  # the earliest time of this batch's rows of the session


def touched(signal: str, rows: list[dict]) -> list[_Session]:
    """The CLI sessions these rows belong to."""
    found: dict[tuple[str, str], _Session] = {}
    for row in rows:
        for family in SESSION_FAMILIES:
            key = sessions.session_of(family, signal, row)
            if key is not None:
                time = row["start_time_unix_nano"] if signal == "spans" else row["time_unix_nano"]
                known = found.get((family.name, key))
                earliest = min(time, known.earliest_ns) if known else time
                found[(family.name, key)] = _Session(family, key, earliest)
    return [found[name] for name in sorted(found)]


def refresh(batch: Batch, signal: str, rows: list[dict]) -> set[int]:
    """Reassemble the sessions these rows touched; returns the ids of the runs whose calls changed."""
    changed = set()
    for session in touched(signal, rows):
        run_id = _refresh_session(batch, session)
        if run_id is not None:
            changed.add(run_id)
    for key in prompted(signal, rows):
        _retitle(batch.project_id, key)
    return changed


def prompted(signal: str, rows: list[dict]) -> list[str]:
    """The sessions a user's prompt among these rows belongs to: it may give the session's title."""
    if signal != "logs":
        return []
    found = set()
    for row in rows:
        attributes = row["attributes"]
        for family in SESSION_FAMILIES:
            spec = family.sessions
            key = attributes.get(spec.log_key)
            if (
                spec.prompt_event
                and attributes.get("event.name") == spec.prompt_event
                and isinstance(key, str)
            ):
                found.add(key.strip()[:200])
    return sorted(key for key in found if key)


def _retitle(project_id: int, key: str) -> None:
    """The title of the session's run again, when the run exists (its calls may come later)."""
    for run in locks.lock_runs(Run.objects.select_related("project").filter(project_id=project_id, key=key)):
        if titles.retitle(run):
            Run.objects.filter(id=run.id).update(title=run.title)


def _stored_rows(project_id: int, session: _Session, since_ns: int) -> tuple[list[dict], list[dict]]:
    spec = session.family.sessions
    assert spec is not None
    spans = []
    if spec.span_names:
        found = Span.objects.filter(
            Q(**{f"attributes__{spec.span_key}": session.key}),
            project_id=project_id,
            name__in=spec.span_names,
        ).select_related("resource")
        spans = [{**stored_span_row(span), "resource": span.resource.attributes} for span in found]
    in_session = LogRecord.objects.filter(
        Q(**{f"attributes__{spec.log_key}": session.key}), project_id=project_id
    ).select_related("resource")
    heavy = list(spec.heavy_log_keys)
    whole = in_session.filter(Q(**{"attributes__event.name__in": list(spec.log_events - set(heavy))}))
    if heavy:  # read whole from the horizon on; before it, only the attributes the assembly needs
        whole = whole | in_session.filter(
            Q(**{"attributes__event.name__in": heavy}), time_unix_nano__gte=since_ns
        )
    logs = [_log_row(log) for log in whole]
    columns = ("trace_id", "span_id", "time_unix_nano", "observed_time_unix_nano", "id")
    for event, keys in spec.heavy_log_keys.items():
        early = in_session.filter(Q(**{"attributes__event.name": event}), time_unix_nano__lt=since_ns)
        picked = early.values_list(*columns, "resource__attributes", *(f"attributes__{key}" for key in keys))
        for row in picked:
            values = row[len(columns) + 1 :]
            attributes = {key: value for key, value in zip(keys, values, strict=True) if value is not None}
            logs.append({**dict(zip(columns, row, strict=False)), "attributes": attributes, "body": None})
            logs[-1]["resource"] = row[len(columns)]
    _timed_by_span(project_id, logs)
    # The order the rows were stored in, whichever query found them.
    logs.sort(key=lambda log: (log["time_unix_nano"], log["observed_time_unix_nano"], log["id"]))
    return spans, logs


def _timed_by_span(project_id: int, logs: list[dict]) -> None:
    """A record with no time at all (no time, observed time or ``event.timestamp``: ``otlp.record_time_ns``)
    takes the start of the span it names, the last and least precise of its times (issue 33)."""
    untimed = [log for log in logs if not log["time_unix_nano"] and log["span_id"]]
    if not untimed:
        return
    rows = Span.objects.filter(
        project_id=project_id,
        trace_id__in={log["trace_id"] for log in untimed},
        span_id__in={log["span_id"] for log in untimed},
    ).values_list("trace_id", "span_id", "start_time_unix_nano")
    starts = {(trace, span): start for trace, span, start in rows}
    for log in untimed:
        log["time_unix_nano"] = starts.get((log["trace_id"], log["span_id"]), 0)


def _log_row(log: LogRecord) -> dict:
    return {
        "id": log.id,
        "trace_id": log.trace_id,
        "span_id": log.span_id,
        "time_unix_nano": log.time_unix_nano,
        "observed_time_unix_nano": log.observed_time_unix_nano,
        "attributes": log.attributes,
        "body": log.body,
        "resource": log.resource.attributes,
    }


# What the assembly decides; numbering and analysis follow from it.
_DERIVED = (
    "seq",
    "turn",
    "carried_fingerprint",
    "carried_invocation",
    "analysis",
    "window_total",
    "item_list_id",
)
_COMPARED = [name for name in CALL_COLUMNS if name not in _DERIVED]


def _same(call: Call, record: CallRecord) -> bool:
    """Whether the stored call is what the session now assembles (nothing to rewrite)."""
    fresh = new_call(Batch(call.project_id), call.run_id, record)
    same_fields = all(getattr(call, name) == getattr(fresh, name) for name in _COMPARED)
    return same_fields and call.items == fresh.items


def _refresh_session(batch: Batch, session: _Session) -> int | None:
    project_id = batch.project_id
    spec = session.family.sessions
    assert spec is not None
    Run.objects.bulk_create(
        [Run(project_id=project_id, key=session.key, key_source=spec.log_key)], ignore_conflicts=True
    )
    # Lock first, read after: a worker storing another batch of this session commits before we read.
    (run,) = locks.lock_runs(
        Run.objects.select_related("project").filter(project_id=project_id, key=session.key)
    )
    since = session.earliest_ns - SLACK_NS
    spans, logs = _stored_rows(project_id, session, since)
    records = {
        (record.trace_id, record.span_id): record
        for record in sessions.records(session.family, spans, logs, count_tokens, since)
        if record.run_key == session.key
    }
    recent = run.calls.filter(name__in=spec.call_names, end_ns__gte=since)
    stored = {(call.trace_id, call.span_id): call for call in recent}
    gone = [call for key, call in stored.items() if key not in records or not _same(call, records[key])]
    new = [record for key, record in records.items() if key not in stored or stored[key] in gone]
    if not gone and not new:
        if run.call_count == 0 and not run.calls.exists():
            run.delete()  # a session with no model request yet (a prompt, a tool record)
        return None

    first = min([call.start_ns for call in gone] + [record.start_ns for record in new])
    for call in gone:
        run.count_call(call.usage_dict(), sign=-1)
    Call.objects.filter(id__in=[call.id for call in gone]).delete()
    if batch.keep_content:
        save_contents(batch, [item for record in new for item in record.items])
    fresh = [new_call(batch, run.id, record) for record in new]
    itemlists.store(project_id, fresh)
    Call.objects.bulk_create(fresh, batch_size=200)
    for record in new:
        # A subagent's name is its calls' (Call.agent_name); the run is the CLI's session.
        run.count_call(record.usage.to_dict(), record.model)
    if new:
        run.service_name = run.service_name or new[0].service[:200]
        run.agent_name = run.agent_name or session.family.name
    # Everything from the first change on is numbered again, then analysed again.
    earlier = run.calls.filter(start_ns__lt=first, seq__isnull=False).count()
    run.calls.filter(start_ns__gte=first).update(seq=None, turn=None)
    invalidate(run, earlier + 1)
    number_calls(run, renumber=True)
    return run.id
