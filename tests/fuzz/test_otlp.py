"""Hostile bytes through the OTLP decoder, the receiver's half and the batch task's half.

The receiver's half (decompress, parse, validate, mask, answer) may raise only ``otlp.OtlpError``; what
it accepts must then load and flatten into rows without any exception (a batch that raises there is
retried for ever), and the rows must be storable in PostgreSQL: no NUL, no lone surrogate, no NaN.
"""

import gzip
import json
import tracemalloc
import zlib

import pytest
from google.protobuf import json_format
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest import otlp
from ingest.redact import DEFAULT_PATTERNS, Redactor, mask_request
from tests.fuzz import strategies
from tests.fuzz.conftest import CASES, bounded, budget
from tests.fuzz.storable import assert_storable

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

LIMIT = 4 * 1024 * 1024
REDACTOR = Redactor.from_patterns(DEFAULT_PATTERNS)
SIGNALS = st.sampled_from([otlp.TRACES, otlp.LOGS])


def receive(signal: str, body: bytes, encoding: str, fmt: str) -> bytes | None:
    """What the receiver does with a body: the bytes it would store, or None when it answers an error."""
    try:
        data = otlp.decompress(body, encoding, LIMIT)
        decoded = otlp.validate(signal, otlp.parse_request(signal, data, fmt))
    except otlp.OtlpError as exc:
        assert exc.status in (400, 413, 415)
        otlp.status_body(exc.status, exc.message, fmt)
        return None
    otlp.export_response(signal, decoded, fmt)
    if not decoded.accepted:
        return None
    mask_request(decoded.message, REDACTOR)
    return decoded.message.SerializeToString()


def process(signal: str, stored: bytes) -> list[tuple[dict, dict]]:
    """What the batch task does first with a stored body: rows for the span or log tables."""
    message = otlp.load(signal, stored)
    rows = list(otlp.spans(message) if signal == otlp.TRACES else otlp.log_records(message))
    for resource, row in rows:
        assert_storable(resource)
        assert_storable(row)
        for name in (
            "start_time_unix_nano",
            "end_time_unix_nano",
            "time_unix_nano",
            "observed_time_unix_nano",
        ):
            if name in row:
                assert 0 <= row[name] < 2**63
    return rows


def round_trip(signal: str, body: bytes, encoding: str = "", fmt: str = otlp.PROTOBUF) -> None:
    with bounded(30):
        stored = receive(signal, body, encoding, fmt)
        if stored is not None:
            process(signal, stored)


def to_json(message, hex_ids: bool) -> bytes:
    document = json_format.MessageToDict(message)
    if hex_ids:
        for resource in document.get("resourceSpans", []) + document.get("resourceLogs", []):
            for scope in resource.get("scopeSpans", []) + resource.get("scopeLogs", []):
                for record in scope.get("spans", []) + scope.get("logRecords", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in record:
                            record[key] = strategies.base64_to_hex(record[key])
    return json.dumps(document).encode()


@budget(120, deep=1_000)
@given(data=st.data(), signal=SIGNALS)
def test_a_generated_request_in_protobuf_is_answered_and_what_is_accepted_can_be_stored(data, signal):
    CASES["otlp: protobuf requests, damaged or not"] += 1
    message = data.draw(strategies.trace_requests() if signal == otlp.TRACES else strategies.logs_requests())
    body = data.draw(strategies.damaged(message.SerializeToString()))
    encoding = data.draw(st.sampled_from(["", "", "gzip", "deflate", "identity"]))
    round_trip(signal, strategies.compress(body, encoding), encoding)


@budget(60, deep=600)
@given(data=st.data(), signal=SIGNALS, hex_ids=st.booleans())
def test_a_generated_request_in_json_is_answered_and_what_is_accepted_can_be_stored(data, signal, hex_ids):
    CASES["otlp: OTLP/JSON requests, damaged or not"] += 1
    message = data.draw(strategies.trace_requests() if signal == otlp.TRACES else strategies.logs_requests())
    body = data.draw(strategies.damaged(to_json(message, hex_ids)))
    round_trip(signal, body, fmt=otlp.JSON)


@budget(150, deadline_ms=5_000, deep=30_000)
@given(signal=SIGNALS, document=strategies.otlp_json_like())
def test_any_json_document_made_of_otlp_field_names_is_answered(signal, document):
    CASES["otlp: JSON documents of OTLP field names, any types"] += 1
    round_trip(signal, json.dumps(document).encode(), fmt=otlp.JSON)


@budget(200, deadline_ms=5_000, deep=55_000)
@given(signal=SIGNALS, body=st.binary(max_size=2000), fmt=st.sampled_from([otlp.PROTOBUF, otlp.JSON]))
def test_random_bytes_are_answered(signal, body, fmt):
    CASES["otlp: random bytes"] += 1
    round_trip(signal, body, fmt=fmt)
    for encoding in ("gzip", "deflate"):
        round_trip(signal, body, encoding, fmt)


@budget(60, deep=1_600)
@given(signal=SIGNALS, depth=st.integers(1, 400), fmt=st.sampled_from([otlp.PROTOBUF, otlp.JSON]))
def test_deeply_nested_any_values_are_refused_or_flattened(signal, depth, fmt):
    CASES["otlp: nested AnyValues up to 400 deep"] += 1
    if fmt == otlp.PROTOBUF:
        body = strategies.request_with_attribute(signal, "deep", nested=depth).SerializeToString()
    else:
        request = strategies.request_with_attribute(signal, "deep", text="PLACEHOLDER")
        text = json.dumps(json_format.MessageToDict(request))
        body = text.replace(
            '{"stringValue": "PLACEHOLDER"}', strategies.nested_any_value_json(depth)
        ).encode()
    round_trip(signal, body, fmt=fmt)


@budget(40, deep=5_000)
@given(signal=SIGNALS, text=strategies.strings())
def test_a_string_that_is_not_utf8_is_refused(signal, text):
    CASES["otlp: invalid UTF-8 in a string field"] += 1
    request = strategies.request_with_attribute(signal, strategies.MARK, text=text + strategies.MARK)
    body = strategies.invalid_utf8(request.SerializeToString())
    assert receive(signal, body, "", otlp.PROTOBUF) is None


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_json_nested_past_the_recursion_limit_is_a_400(depth):
    CASES["otlp: JSON nested past the recursion limit"] += 1
    for body in ("[" * depth + "]" * depth, '{"resourceSpans": ' + "[" * depth + "]" * depth + "}"):
        with pytest.raises(otlp.BadRequest):
            with bounded(30):
                otlp.parse_request(otlp.TRACES, body.encode(), otlp.JSON)


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_decompression_bomb_stops_at_the_limit_without_inflating_it_whole(encoding):
    CASES["otlp: decompression bombs"] += 1
    limit = 8 * 1024 * 1024
    bomb = (
        gzip.compress(bytes(1024 * 1024 * 1024), 9)
        if encoding == "gzip"
        else zlib.compress(bytes(1024**3), 9)
    )
    tracemalloc.start()
    try:
        with pytest.raises(otlp.TooLarge), bounded(60):
            otlp.decompress(bomb, encoding, limit)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit, (
        f"peak {peak / 2**20:.0f} MiB while inflating to a limit of {limit / 2**20:.0f} MiB"
    )


def test_many_gzip_members_are_bounded_too():
    CASES["otlp: decompression bombs"] += 1
    member = gzip.compress(bytes(1024 * 1024), 9)
    with pytest.raises(otlp.TooLarge), bounded(60):
        otlp.decompress(member * 200, "gzip", 16 * 1024 * 1024)


@pytest.mark.parametrize("shape", ["attributes", "spans", "nested", "giant string"])
def test_memory_of_a_large_request_stays_within_a_fixed_multiple_of_its_size(shape):
    """A request at the size limit must not take unbounded memory in the receiver or the worker."""
    CASES["otlp: large requests, memory"] += 1
    request = strategies.large_request(shape, size=1024 * 1024)
    body = request.SerializeToString()
    tracemalloc.start()
    try:
        with bounded(120):
            stored = receive(otlp.TRACES, body, "", otlp.PROTOBUF)
            _, receiver_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            rows = process(otlp.TRACES, stored)
            _, worker_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows
    # Python objects for every attribute cost more than their protobuf bytes; the bound is the point.
    mib = {
        name: value / 2**20 for name, value in [("body", len(body)), ("r", receiver_peak), ("w", worker_peak)]
    }
    print(f"{shape}: {mib['body']:.1f} MiB -> receiver {mib['r']:.0f} MiB, worker {mib['w']:.0f} MiB")
    assert receiver_peak < 4 * len(body) + 2**20
    assert worker_peak < 40 * len(body)


def test_a_request_with_a_trace_id_of_the_wrong_size_loses_only_that_span():
    CASES["otlp: fixed cases"] += 1
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    scope.spans.add(trace_id=b"\x01" * 16, span_id=b"\x01" * 8, name="good")
    scope.spans.add(trace_id=b"\x01" * 15, span_id=b"\x02" * 8, name="bad")
    decoded = otlp.validate(
        otlp.TRACES, otlp.parse_request(otlp.TRACES, request.SerializeToString(), otlp.PROTOBUF)
    )
    assert (decoded.accepted, decoded.rejected) == (1, 1)
