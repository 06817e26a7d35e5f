"""Content that arrives apart from its span: log events joined to their call, whichever comes first.

Some instrumentations send a call's messages as log records (``CONTENT_LOG_EVENTS``), in batches of
their own. A span batch reads the records already stored for its calls; a log batch gives calls stored
without content the content its records carry, and renumbers their runs from those calls on.
"""

from collections import defaultdict

from ingest import families, itemlists, locks, normalise
from ingest.bulk import update_rows
from ingest.call_rows import CALL_CONTENT_FIELDS, Batch, content_fields
from ingest.contents import count_tokens, save_contents
from ingest.models import Call, LogRecord, Run, Span
from ingest.normalise import Event
from ingest.numbering import number_calls
from ingest.span_rows import SpanRow, span_row

# Log events that carry a call's content (the legacy span events are read from the span itself).
CONTENT_LOG_EVENTS = families.CONTENT_LOG_EVENTS


def forget_event_content(batch: Batch, keys: list[tuple[str, str]]) -> None:
    """Hash-only: content log records that a call has used keep their ids and times, not their content."""
    if keys:
        LogRecord.objects.filter(
            project_id=batch.project_id,
            trace_id__in={trace for trace, _ in keys},
            span_id__any_of={span for _, span in keys},
            event_name__in=CONTENT_LOG_EVENTS,
        ).update(body=None, attributes={"ctxview.content_dropped": True})


def content_events(batch: Batch, keys: list[tuple[str, str]]) -> dict[tuple[str, str], list[Event]]:
    """Content log records already stored for these spans (they may arrive before their span)."""
    if not keys:
        return {}
    found: dict[tuple[str, str], list[Event]] = defaultdict(list)
    wanted = set(keys)
    records = (
        LogRecord.objects.filter(
            project_id=batch.project_id,
            trace_id__in={trace_id for trace_id, _ in keys},
            span_id__any_of={span_id for _, span_id in keys},
            event_name__in=CONTENT_LOG_EVENTS,
        )
        .order_by("time_unix_nano", "observed_time_unix_nano", "id")
        .values_list("trace_id", "span_id", "event_name", "attributes", "body")
    )
    for trace_id, span_id, name, attributes, body in records:
        if (trace_id, span_id) in wanted:
            found[(trace_id, span_id)].append(Event(name, attributes, body))
    return found


def join_log_events(batch: Batch, rows: list[dict]) -> set[int]:
    """Give calls stored without content the content their log events carry, whenever those arrive.

    Returns the ids of the runs whose calls changed."""
    keys = {
        (row["trace_id"], row["span_id"])
        for row in rows
        if row["span_id"] and row["event_name"] in CONTENT_LOG_EVENTS
    }
    if not keys:
        return set()
    locks.join_traces(batch.project_id, {trace_id for trace_id, _ in keys}, shared=False)
    candidates = Call.objects.filter(
        project_id=batch.project_id,
        trace_id__in={trace for trace, _ in keys},
        span_id__any_of={span for _, span in keys},
        content_captured=False,
    ).exclude(manifest_source="explicit")
    calls = [call for call in candidates if (call.trace_id, call.span_id) in keys]
    if not calls:
        return set()
    runs = locks.lock_runs(Run.objects.defer("analysis_state").filter(id__in={call.run_id for call in calls}))
    call_keys = [(call.trace_id, call.span_id) for call in calls]
    events = content_events(batch, call_keys)
    spans = stored_spans(batch.project_id, call_keys)
    items = []
    for call in calls:
        span = spans.get((call.trace_id, call.span_id))
        if span is None:
            continue
        record = normalise.call_record(
            stored_span_row(span),
            span.resource.attributes,
            events[(call.trace_id, call.span_id)],
            count_tokens,
        )
        items.extend(record.items)
        for name, value in content_fields(record).items():
            setattr(call, name, value)
        # A user message now visible may start a new turn: renumber the run from this call on.
        call.seq = call.turn = None
    if batch.keep_content:
        save_contents(batch, items)
    else:
        forget_event_content(batch, call_keys)
    itemlists.store(batch.project_id, calls)
    update_rows(Call, calls, [*CALL_CONTENT_FIELDS, "seq", "turn"])
    for run in runs:
        number_calls(run, renumber=True)
    return {run.id for run in runs}


def stored_spans(project_id: int, keys: list[tuple[str, str]]) -> dict:
    spans = Span.objects.filter(
        project_id=project_id,
        trace_id__in={trace for trace, _ in keys},
        span_id__any_of={span for _, span in keys},
    ).select_related("resource")
    return {(span.trace_id, span.span_id): span for span in spans}


def stored_span_row(span: Span) -> SpanRow:
    """A stored span as a span row, for ``normalise.call_record``."""
    return span_row(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=span.attributes,
        events=span.events,
        scope_name=span.scope_name,
        scope_version=span.scope_version,
    )
