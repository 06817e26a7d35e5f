"""OTLP/HTTP decoding: body bytes -> validated protobuf request -> plain data. No Django here.

The receiver uses the first half (decompress, parse, validate, encode the answer); the batch task
uses the second (turn a stored request into plain dicts for the span and log tables).
"""

import base64
import binascii
import json
import math
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ingest import semconv
from ingest.span_rows import SpanRow, span_row
from ingest.storable import nul_free

TRACES = "traces"
LOGS = "logs"
PROTOBUF = "protobuf"
JSON = "json"

_REQUEST = {TRACES: ExportTraceServiceRequest, LOGS: ExportLogsServiceRequest}
_GRPC_CODE = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    405: code_pb2.UNIMPLEMENTED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    503: code_pb2.UNAVAILABLE,
}


class OtlpError(Exception):
    """A request ctxview cannot take; ``status`` is the HTTP status to answer with."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(OtlpError):
    status = 400


class LengthRequired(OtlpError):
    status = 411


class TooLarge(OtlpError):
    status = 413


class UnsupportedMediaType(OtlpError):
    status = 415


@dataclass(frozen=True)
class Decoded:
    """A parsed request with its invalid spans or log records removed."""

    message: Message
    accepted: int
    rejected: int
    error_message: str


# --- Request side --------------------------------------------------------------------------------


def body_format(content_type: str) -> str:
    """``protobuf`` or ``json`` from a Content-Type header (parameters such as charset ignored)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type == "application/x-protobuf":
        return PROTOBUF
    if media_type == "application/json":
        return JSON
    shown = media_type or "none"
    raise UnsupportedMediaType(
        f"Content-Type {shown!r} is not supported: send application/x-protobuf or application/json"
    )


# Input is fed to zlib in slices: at the end of a gzip member zlib copies the rest of what it was given
# into ``unused_data``, so feeding the whole remaining body made many small members quadratic
# (15 MB of empty members took minutes). A slice bounds that copy; output comes in steps so that
# ``grow`` can refuse before much more is allocated.
_INPUT_SLICE = 1024
_OUTPUT_STEP = 1024 * 1024


def decompress(body: bytes, encoding: str, limit: int, grow: Callable[[int], None] | None = None) -> bytes:
    """Undo Content-Encoding, never producing more than ``limit`` bytes (a gzip bomb stays small).

    ``grow(n)`` is called before ``n`` more decompressed bytes are kept (it may raise to stop)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(body) > limit:
            raise TooLarge(f"body is {len(body)} bytes; the limit is {limit}")
        return body
    if encoding == "gzip":
        wbits = 16 + zlib.MAX_WBITS
    elif encoding == "deflate":
        # HTTP "deflate" is the zlib format, but some clients send raw deflate: accept both.
        wbits = zlib.MAX_WBITS if body[:1] == b"\x78" else -zlib.MAX_WBITS
    else:
        raise UnsupportedMediaType(
            f"Content-Encoding {encoding!r} is not supported: use gzip, deflate or none"
        )
    view = memoryview(body)
    position = 0  # of the next slice of ``view``
    pending: bytes | memoryview = b""  # input given to zlib but not consumed yet
    out = bytearray()
    inflater = zlib.decompressobj(wbits)
    try:
        while True:
            piece = inflater.decompress(pending, min(_OUTPUT_STEP, limit - len(out) + 1))
            pending = inflater.unconsumed_tail
            if piece:
                if len(out) + len(piece) > limit:
                    raise TooLarge(f"body is larger than {limit} bytes once decompressed")
                if grow is not None:
                    grow(len(piece))
                out += piece
            if inflater.eof:
                pending = inflater.unused_data
                # gzip allows several members one after another; after deflate's end, nothing is read.
                if encoding != "gzip" or (not pending and position >= len(view)):
                    break
                inflater = zlib.decompressobj(wbits)
            elif not pending and not piece:
                # zlib has nothing more to give from what it has: feed it the next slice.
                if position >= len(view):
                    raise BadRequest(f"{encoding} body is truncated")
                pending = view[position : position + _INPUT_SLICE]
                position += len(pending)
    except zlib.error as exc:
        raise BadRequest(f"body is not valid {encoding}: {exc}") from None
    return bytes(out)


GZIP_MAGIC = b"\x1f\x8b"  # a zlib stream (what the receiver compresses) never starts so


def stored_request(body: bytes) -> bytes:
    """The request bytes of a raw batch's body: zlib-compressed by the receiver, or the request's gzip
    body as it was sent (one or more members; checked, and bounded, when it was received)."""
    if body[:2] == GZIP_MAGIC:
        return decompress(body, "gzip", sys.maxsize)
    return zlib.decompress(body)


def parse_request(signal: str, data: bytes, fmt: str) -> Message:
    """Parse an Export*ServiceRequest from protobuf or OTLP/JSON bytes."""
    message = _REQUEST[signal]()
    what = f"Export{'Trace' if signal == TRACES else 'Logs'}ServiceRequest"
    if fmt == PROTOBUF:
        try:
            message.ParseFromString(data)
        except (DecodeError, RecursionError) as exc:
            raise BadRequest(
                f"body is not a valid protobuf {what}{_other_signal_hint(signal, data)}: {exc}"
            ) from None
        return message
    try:
        document = json.loads(data)
    except RecursionError:
        raise BadRequest("JSON body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"body is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadRequest(f"JSON body must be an object ({what}), not {type(document).__name__}")
    _hex_ids_to_base64(signal, document)
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True, max_recursion_depth=100)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise BadRequest(f"JSON body is not a valid {what}: {_first_line(str(exc))}") from None
    return message


def _other_signal_hint(signal: str, data: bytes) -> str:
    other = LOGS if signal == TRACES else TRACES
    try:
        if _REQUEST[other].FromString(data).ByteSize():
            return f" (it parses as a {other} export: is it sent to /v1/{signal} by mistake?)"
    except (DecodeError, RecursionError):
        pass
    return ""


def _first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else "unknown error"


# OTLP/JSON writes trace and span ids as hex, but protobuf's JSON mapping expects base64.
# Some exporters send base64 anyway: accept both. An id that is neither becomes one zero byte,
# which validation then rejects for that span alone.
_INVALID_ID = base64.b64encode(b"\x00").decode()


def _fix_id(value: Any, size: int) -> Any:
    if not isinstance(value, str) or value == "":
        return value
    if len(value) == size * 2:
        try:
            return base64.b64encode(bytes.fromhex(value)).decode()
        except ValueError:
            pass
    try:
        if len(base64.b64decode(value, validate=True)) == size:
            return value
    except (binascii.Error, ValueError):
        pass
    return _INVALID_ID


def _dicts(value: Any) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _hex_ids_to_base64(signal: str, document: dict) -> None:
    outer, middle, inner = (
        ("resourceSpans", "scopeSpans", "spans")
        if signal == TRACES
        else ("resourceLogs", "scopeLogs", "logRecords")
    )
    for resource in _dicts(document.get(outer)):
        for scope in _dicts(resource.get(middle)):
            for record in _dicts(scope.get(inner)):
                for key, size in (("traceId", 16), ("spanId", 8), ("parentSpanId", 8)):
                    if key in record:
                        record[key] = _fix_id(record[key], size)
                for link in _dicts(record.get("links")):
                    for key, size in (("traceId", 16), ("spanId", 8)):
                        if key in link:
                            link[key] = _fix_id(link[key], size)


def _id_problem(name: str, value: bytes, size: int, optional: bool) -> str | None:
    if optional and len(value) == 0:
        return None
    if len(value) != size:
        return f"{name} is {len(value)} bytes, not {size}"
    if value == bytes(size):
        return f"{name} is all zeros"
    return None


def validate(signal: str, message: Message) -> Decoded:
    """Remove invalid spans (or log records) from ``message`` and count them."""
    if signal == TRACES:
        return _validate_traces(message)
    return _validate_logs(message)


def _validate_traces(message: ExportTraceServiceRequest) -> Decoded:
    accepted = rejected = with_ids = 0
    first_problem = ""
    for resource_spans in message.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            bad = []
            for index, span in enumerate(scope_spans.spans):
                if span.trace_id or span.span_id:
                    with_ids += 1
                problem = (
                    _id_problem("trace_id", span.trace_id, 16, optional=False)
                    or _id_problem("span_id", span.span_id, 8, optional=False)
                    or _id_problem("parent_span_id", span.parent_span_id, 8, optional=True)
                )
                if problem:
                    bad.append(index)
                    first_problem = first_problem or f"span {span.name[:80]!r}: {problem}"
            _remove(scope_spans.spans, bad)
            rejected += len(bad)
            accepted += len(scope_spans.spans)
    if rejected and with_ids == 0:
        # ResourceLogs and ResourceSpans share field numbers: a logs export decodes as id-less spans.
        raise BadRequest(
            f"none of the {rejected} spans has a trace_id or span_id: "
            "is this a logs export sent to /v1/traces?"
        )
    return Decoded(
        message, accepted, rejected, _rejection_message(rejected, accepted, "spans", first_problem)
    )


def _validate_logs(message: ExportLogsServiceRequest) -> Decoded:
    accepted = rejected = timed = 0
    first_problem = ""
    for resource_logs in message.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            bad = []
            for index, record in enumerate(scope_logs.log_records):
                if record.time_unix_nano or record.observed_time_unix_nano:
                    timed += 1
                problem = _id_problem("trace_id", record.trace_id, 16, optional=True) or _id_problem(
                    "span_id", record.span_id, 8, optional=True
                )
                if problem:
                    bad.append(index)
                    first_problem = first_problem or f"log record: {problem}"
            _remove(scope_logs.log_records, bad)
            rejected += len(bad)
            accepted += len(scope_logs.log_records)
    if accepted + rejected and timed == 0:
        # The same field-number overlap the other way: a traces export decodes as untimed records.
        raise BadRequest(
            "no log record has a time or observed time: is this a traces export sent to /v1/logs?"
        )
    return Decoded(
        message, accepted, rejected, _rejection_message(rejected, accepted, "log records", first_problem)
    )


def _remove(repeated, indexes: list[int]) -> None:
    for index in reversed(indexes):
        del repeated[index]


def _rejection_message(rejected: int, accepted: int, what: str, first_problem: str) -> str:
    if not rejected:
        return ""
    return f"rejected {rejected} of {rejected + accepted} {what}; first: {first_problem}"


# --- Response side -------------------------------------------------------------------------------


def export_response(signal: str, decoded: Decoded | None, fmt: str) -> bytes:
    """The Export*ServiceResponse, with partial_success only when something was rejected."""
    if signal == TRACES:
        response: Message = ExportTraceServiceResponse()
        if decoded and decoded.rejected:
            response.partial_success.rejected_spans = decoded.rejected
            response.partial_success.error_message = decoded.error_message
    else:
        response = ExportLogsServiceResponse()
        if decoded and decoded.rejected:
            response.partial_success.rejected_log_records = decoded.rejected
            response.partial_success.error_message = decoded.error_message
    return _encode(response, fmt)


def status_body(http_status: int, message: str, fmt: str) -> bytes:
    """A google.rpc.Status body, as OTLP/HTTP prescribes for failures."""
    status = status_pb2.Status(code=_GRPC_CODE.get(http_status, code_pb2.UNKNOWN), message=message)
    if http_status == 400:
        detail = error_details_pb2.BadRequest()
        detail.field_violations.add(field="body", description=message)
        status.details.add().Pack(detail)
    return _encode(status, fmt)


def _encode(message: Message, fmt: str) -> bytes:
    if fmt == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode()


# --- Stored request -> plain data ----------------------------------------------------------------


def load(signal: str, data: bytes) -> Message:
    """Parse a stored (already validated) request."""
    message = _REQUEST[signal]()
    message.ParseFromString(data)
    return message


def any_value(value: AnyValue) -> Any:
    """An OTLP AnyValue as JSON-storable Python data (bytes become base64 text)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return nul_free(value.string_value)
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        number = value.double_value
        # JSON has no NaN or infinity; keep them readable instead of failing the batch.
        return number if math.isfinite(number) else str(number)
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None


def attributes(key_values) -> dict[str, Any]:
    return {nul_free(kv.key): any_value(kv.value) for kv in key_values}


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _time_ns(value: int) -> int:
    # fixed64 on the wire; the database column is signed.
    return value if value < 2**63 else 0


def spans(message: ExportTraceServiceRequest) -> Iterator[tuple[dict, SpanRow]]:
    """(resource attributes, span row) for each span of a stored traces request."""
    for resource_spans in message.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            for span in scope_spans.spans:
                yield (
                    resource,
                    span_row(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        name=nul_free(span.name),
                        kind=span.kind,
                        start_ns=_time_ns(span.start_time_unix_nano),
                        end_ns=_time_ns(span.end_time_unix_nano),
                        status_code=span.status.code,
                        status_message=nul_free(span.status.message),
                        scope_name=nul_free(scope.name)[:200],
                        scope_version=nul_free(scope.version)[:100],
                        attributes=attributes(span.attributes),
                        events=[
                            {
                                "name": nul_free(event.name),
                                "time_unix_nano": _time_ns(event.time_unix_nano),
                                "attributes": attributes(event.attributes),
                            }
                            for event in span.events
                        ],
                        links=[
                            {
                                "trace_id": link.trace_id.hex(),
                                "span_id": link.span_id.hex(),
                                "attributes": attributes(link.attributes),
                            }
                            for link in span.links
                        ],
                    ),
                )


def _parts(rows: Iterator[tuple[dict, dict]], sizes: Iterator[int], max_bytes: int) -> Iterator[list]:
    part, size = [], 0
    for row, row_size in zip(rows, sizes, strict=True):
        if part and size + row_size > max_bytes:
            yield part
            part, size = [], 0
        part.append(row)
        size += row_size
    if part:
        yield part


def span_parts(message: ExportTraceServiceRequest, max_bytes: int) -> Iterator[list[tuple[dict, dict]]]:
    """``spans(message)`` in parts of consecutive spans of at most ``max_bytes`` encoded (or one span)."""
    return _parts(spans(message), (span.ByteSize() for span in _each_span(message)), max_bytes)


def log_parts(message: ExportLogsServiceRequest, max_bytes: int) -> Iterator[list[tuple[dict, dict]]]:
    """``log_records(message)`` in parts of at most ``max_bytes`` encoded (or one record)."""
    sizes = (
        record.ByteSize()
        for resource_logs in message.resource_logs
        for scope_logs in resource_logs.scope_logs
        for record in scope_logs.log_records
    )
    return _parts(log_records(message), sizes, max_bytes)


def trace_ids(message: ExportTraceServiceRequest) -> set[str]:
    """The traces a stored traces request has spans of."""
    return {span.trace_id.hex() for span in _each_span(message)}


def _each_span(message: ExportTraceServiceRequest) -> Iterator:
    """The request's spans, in the order ``spans`` yields their rows."""
    for resource_spans in message.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            yield from scope_spans.spans


def record_time_ns(record, record_attributes: dict) -> int:
    """When a log record's event happened: its time; else when the SDK observed it (the OTel log data
    model: "use Timestamp if it is present, otherwise ObservedTimestamp"); else the event's own
    ``event.timestamp`` attribute (milliseconds at best); else 0 (the reader falls back on the record's
    span). Codex CLI 0.171 sends every record with a time of 0 (issue 33)."""
    time = _time_ns(record.time_unix_nano) or _time_ns(record.observed_time_unix_nano)
    if time:
        return time
    stamp = record_attributes.get(semconv.EVENT_TIMESTAMP)
    if isinstance(stamp, str) and 0 < len(stamp) <= 64:
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            return 0
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        delta = moment - EPOCH
        ns = (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000
        return ns if 0 < ns < 2**63 else 0
    return 0


def log_records(message: ExportLogsServiceRequest) -> Iterator[tuple[dict, dict]]:
    """(resource attributes, log row) for each record of a stored logs request."""
    for resource_logs in message.resource_logs:
        resource = attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            scope = scope_logs.scope
            for record in scope_logs.log_records:
                record_attributes = attributes(record.attributes)
                # Older SDKs put the event name in an attribute instead of the event_name field.
                event_name = record.event_name or record_attributes.get(semconv.EVENT_NAME_ATTRIBUTE) or ""
                yield (
                    resource,
                    {
                        "trace_id": record.trace_id.hex(),
                        "span_id": record.span_id.hex(),
                        "time_unix_nano": record_time_ns(record, record_attributes),
                        "observed_time_unix_nano": _time_ns(record.observed_time_unix_nano),
                        "severity_number": record.severity_number,
                        "severity_text": nul_free(record.severity_text)[:50],
                        "event_name": nul_free(str(event_name))[:200],
                        "scope_name": nul_free(scope.name)[:200],
                        "scope_version": nul_free(scope.version)[:100],
                        "body": any_value(record.body) if record.HasField("body") else None,
                        "attributes": record_attributes,
                    },
                )
