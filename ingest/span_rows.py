"""The span row: one span as the write side hands it on, whichever way it came.

A span is decoded from an OTLP request (``otlp.spans``), assembled from a coding CLI's session records
(``families.base.session_row``: no parent, no events), or read back from the database when its content
arrives late (``late_content.stored_span_row``). All three are this one shape, built here, so that
``normalise.call_record`` and the families read the same keys whatever the source.
"""

from collections.abc import Sequence
from typing import TypedDict


class SpanRow(TypedDict):
    trace_id: str  # hex
    span_id: str  # hex
    parent_span_id: str  # hex; "" for a root
    name: str
    kind: int  # OTLP's SpanKind; 0 (unspecified) where the source has none
    start_time_unix_nano: int
    end_time_unix_nano: int
    status_code: int
    status_message: str
    scope_name: str
    scope_version: str
    attributes: dict
    events: list  # {"name", "time_unix_nano", "attributes"}
    links: list  # {"trace_id", "span_id", "attributes"}


def span_row(
    *,
    trace_id: str,
    span_id: str,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: dict,
    parent_span_id: str = "",
    kind: int = 0,
    status_code: int = 0,
    status_message: str = "",
    scope_name: str = "",
    scope_version: str = "",
    events: Sequence[dict] = (),
    links: Sequence[dict] = (),
) -> SpanRow:
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent_span_id,
        "name": name,
        "kind": kind,
        "start_time_unix_nano": start_ns,
        "end_time_unix_nano": end_ns,
        "status_code": status_code,
        "status_message": status_message,
        "scope_name": scope_name,
        "scope_version": scope_version,
        "attributes": attributes,
        "events": list(events),
        "links": list(links),
    }
