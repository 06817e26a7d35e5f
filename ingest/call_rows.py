"""What one batch writes as a call: the batch's scope, and a call's row built from its record."""

from dataclasses import dataclass, field

from ingest.models import Call
from ingest.records import CallRecord, datetime_of


@dataclass(frozen=True)
class Batch:
    """What every step of writing one batch's calls needs to know about where they go."""

    project_id: int
    keep_content: bool = True  # False: a hash-only project (content is hashed, never stored)
    # Texts looked up in the project's contents while the batch was interpreted: hash -> stored then.
    # A stored text stays stored, so storing the batch's texts asks only about the others again.
    texts_looked_up: dict[str, bool] = field(default_factory=dict, compare=False)


# A call's fields that come from its content (the items and what they were read from): the one list,
# used to build a call and to update one whose content arrived late.
CALL_CONTENT = {
    "user_fingerprint": lambda record: record.user_fingerprint or "",
    "usage_raw": lambda record: record.usage.raw,
    "notes": lambda record: list(record.notes),
    "content_captured": lambda record: record.content_captured,
    "manifest_source": lambda record: record.manifest_source,
    "manifest_error": lambda record: record.manifest_error,
    "items": lambda record: [item.to_dict() for item in record.items],
    "excluded": lambda record: [dict(entry) for entry in record.excluded],
    "budget": lambda record: record.budget,
    "prompt_version": lambda record: record.prompt_version,
    "tool_calls": lambda record: list(record.tool_calls),
    "tool_definitions": lambda record: (
        list(record.tool_definitions) if record.tool_definitions is not None else None
    ),
    "continues_response": lambda record: record.continues_response,
    "window_gap": lambda record: record.window_gap,
    "output_items": lambda record: [item.to_dict() for item in record.output_items],
}
# The columns they are stored in: the items as an item list (ingest/itemlists.py stores it first).
CALL_CONTENT_FIELDS = tuple("item_list" if name == "items" else name for name in CALL_CONTENT)

CALL_COLUMNS = [field.attname for field in Call._meta.concrete_fields if not field.primary_key]


def content_fields(record: CallRecord) -> dict:
    return {name: value_of(record) for name, value_of in CALL_CONTENT.items()}


_CALL_FIELDS = Call._meta.concrete_fields


def new_call(batch: Batch, run_id: int | None, record: CallRecord) -> Call:
    """The (unsaved, unnumbered) call of a record, in run ``run_id`` (None: set once it is known)."""
    values = {
        "project_id": batch.project_id,
        "run_id": run_id,
        "trace_id": record.trace_id,
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "turn_hint": record.turn_hint,
        "name": record.name,
        "start_ns": record.start_ns,
        "end_ns": record.end_ns,
        "started_at": datetime_of(record.start_ns),
        "provider": record.provider,
        "operation": record.operation,
        "request_model": record.request_model,
        "response_model": record.response_model,
        "response_id": record.response_id,
        "agent_name": record.agent_name,
        "finish_reasons": list(record.finish_reasons),
        **record.usage.to_dict(),
        **content_fields(record),
    }
    items = values.pop("items")
    # Every field by position, as Django builds a model read from the database: its keyword path
    # (a lookup per field and keyword) was 4% of a batch's CPU.
    call = Call(*[values[f.attname] if f.attname in values else f.get_default() for f in _CALL_FIELDS])
    call.items = items
    if record.manifest_source == "derived":  # items of a sender's manifest are read as stored
        call.made_items = record.items
    return call


def call_row(call: Call) -> dict:
    """A call as a row for ``bulk.insert_rows``."""
    return {name: getattr(call, name) for name in CALL_COLUMNS}
