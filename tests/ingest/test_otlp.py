"""The pure decoding module: no database here."""

import gzip
import json
import math
import zlib

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ingest import otlp
from tests import factories


def test_body_format_ignores_parameters_and_case():
    assert otlp.body_format("Application/JSON; charset=utf-8") == otlp.JSON
    assert otlp.body_format("application/x-protobuf") == otlp.PROTOBUF
    with pytest.raises(otlp.UnsupportedMediaType, match="'text/html' is not supported"):
        otlp.body_format("text/html")
    with pytest.raises(otlp.UnsupportedMediaType, match="'none' is not supported"):
        otlp.body_format("")


def test_decompress_never_produces_more_than_the_limit():
    bomb = gzip.compress(b"a" * 10_000_000)
    with pytest.raises(otlp.TooLarge):
        otlp.decompress(bomb, "gzip", limit=100_000)
    assert otlp.decompress(bomb, "gzip", limit=10_000_000) == b"a" * 10_000_000


def test_decompress_accepts_concatenated_gzip_members():
    assert otlp.decompress(gzip.compress(b"ab") + gzip.compress(b"cd"), "GZIP ", limit=100) == b"abcd"


def test_decompress_reads_members_across_input_slices_and_output_steps():
    # Members of every size, some far larger than a slice of input or a step of output.
    parts = [b"", b"a", bytes(range(256)) * 40, b"z" * 3_000_000, b"", b"tail"]
    body = b"".join(gzip.compress(part) for part in parts)
    assert otlp.decompress(body, "gzip", limit=10_000_000) == b"".join(parts)


def test_decompress_feeds_zlib_each_byte_a_bounded_number_of_times(monkeypatch):
    # It gave zlib the rest of the body at every member: 4x the members, 16x the bytes (4 MB: 28 s).
    # Counted, not timed: each member is handed to zlib with at most one input slice after it, so the
    # bytes fed grow linearly with the body (the old way: with the square of the number of members).
    fed = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args):
            self.inner = real(*args)

        def decompress(self, data, max_length=0):
            fed.append(len(data))
            return self.inner.decompress(data, max_length)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    monkeypatch.setattr(otlp.zlib, "decompressobj", Counting)
    for count in (1_000, 25_000, 100_000):
        fed.clear()
        body = gzip.compress(b"") * count
        assert otlp.decompress(body, "gzip", limit=100) == b""
        bound = len(body) + count * otlp._INPUT_SLICE
        assert sum(fed) <= bound, f"{count} members: {sum(fed)} bytes fed for {len(body)}"


def test_decompress_asks_grow_before_keeping_more_bytes():
    grown = []
    data = bytes(range(256)) * 20_000  # 5 MB: several output steps
    assert otlp.decompress(gzip.compress(data), "gzip", limit=len(data), grow=grown.append) == data
    assert sum(grown) == len(data) and len(grown) > 1


def test_decompress_stops_when_grow_refuses():
    class Refused(Exception):
        pass

    def grow(nbytes: int) -> None:
        raise Refused()

    with pytest.raises(Refused):
        otlp.decompress(gzip.compress(b"x" * 100), "gzip", limit=1000, grow=grow)


# mtime=0: the same bytes, and so the same test ids, in every pytest-xdist worker.
@pytest.mark.parametrize(
    "body", [b"", gzip.compress(b"abc", mtime=0)[:-3], gzip.compress(b"abc", mtime=0) + b"\x1f"]
)
def test_decompress_rejects_empty_and_truncated_gzip(body):
    with pytest.raises(otlp.BadRequest, match="truncated"):
        otlp.decompress(body, "gzip", limit=100)


def test_decompress_rejects_junk():
    with pytest.raises(otlp.BadRequest, match="not valid gzip"):
        otlp.decompress(b"not gzip at all", "gzip", limit=100)
    with pytest.raises(otlp.BadRequest, match="not valid deflate"):
        otlp.decompress(b"\x78junk", "deflate", limit=100)


def test_decompress_applies_the_limit_to_plain_bodies_too():
    with pytest.raises(otlp.TooLarge):
        otlp.decompress(b"x" * 101, "", limit=100)
    assert otlp.decompress(zlib.compress(b"x" * 100), "deflate", limit=100) == b"x" * 100


def test_parse_rejects_json_that_is_not_an_object():
    with pytest.raises(otlp.BadRequest, match="must be an object"):
        otlp.parse_request(otlp.TRACES, b"[1, 2]", otlp.JSON)


def test_parse_rejects_deeply_nested_json_with_a_message():
    document = {"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": {}}]}}]}
    value = document["resourceSpans"][0]["resource"]["attributes"][0]["value"]
    for _ in range(200):
        value["arrayValue"] = {"values": [{}]}
        value = value["arrayValue"]["values"][0]
    with pytest.raises(otlp.BadRequest, match="not a valid ExportTraceServiceRequest"):
        otlp.parse_request(otlp.TRACES, json.dumps(document).encode(), otlp.JSON)


def test_parse_rejects_json_nested_beyond_python_recursion():
    with pytest.raises(otlp.BadRequest, match="nested too deeply"):
        otlp.parse_request(otlp.TRACES, b"[" * 100_000 + b"]" * 100_000, otlp.JSON)


def test_parse_rejects_invalid_utf8_in_protobuf_strings():
    request = factories.trace_request(spans=1)
    data = request.SerializeToString().replace(b"chat model-1", b"chat model\xff1")
    with pytest.raises(otlp.BadRequest, match="not a valid protobuf"):
        otlp.parse_request(otlp.TRACES, data, otlp.PROTOBUF)


def test_an_unparseable_json_id_rejects_only_its_span():
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "zz", "spanId": "0102030405060708", "name": "a"},
                            {
                                "traceId": "0102030405060708090a0b0c0d0e0f10",
                                "spanId": "0102030405060708",
                                "name": "b",
                                "parentSpanId": "nope",
                            },
                            {
                                "traceId": "0102030405060708090a0b0c0d0e0f10",
                                "spanId": "0102030405060709",
                                "name": "c",
                            },
                        ]
                    }
                ]
            }
        ]
    }
    decoded = otlp.validate(
        otlp.TRACES, otlp.parse_request(otlp.TRACES, json.dumps(document).encode(), otlp.JSON)
    )
    assert (decoded.accepted, decoded.rejected) == (1, 2)
    assert [span.name for span in decoded.message.resource_spans[0].scope_spans[0].spans] == ["c"]


def test_any_value_converts_every_kind():
    value = AnyValue()
    value.kvlist_value.values.add(key="s").value.string_value = "nul\x00here"
    value.kvlist_value.values.add(key="i").value.int_value = -(2**63)
    value.kvlist_value.values.add(key="d").value.double_value = math.nan
    value.kvlist_value.values.add(key="b").value.bytes_value = b"\x00\x01"
    array = value.kvlist_value.values.add(key="a").value.array_value
    array.values.add().bool_value = True
    array.values.add()  # an empty AnyValue is valid
    assert otlp.any_value(value) == {
        "s": "nul\ufffdhere",
        "i": -(2**63),
        "d": "nan",
        "b": "AAE=",
        "a": [True, None],
    }


def test_spans_yields_plain_rows_with_hex_ids():
    request = factories.trace_request(spans=2, trace_id=bytes(range(1, 17)))
    rows = list(otlp.spans(request))
    resource, row = rows[0]
    assert resource == {"service.name": "agent"}
    assert row["trace_id"] == "0102030405060708090a0b0c0d0e0f10"
    assert row["span_id"] == "0000000000000001"
    assert row["parent_span_id"] == ""
    assert row["attributes"] == {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 100}
    assert row["scope_name"] == "tests"


def test_log_records_read_the_event_name_from_the_old_attribute():
    request = factories.logs_request(records=1)
    record = request.resource_logs[0].scope_logs[0].log_records[0]
    record.event_name = ""
    attribute = record.attributes.add(key="event.name")
    attribute.value.string_value = "gen_ai.user.message"
    [(_, row)] = list(otlp.log_records(request))
    assert row["event_name"] == "gen_ai.user.message"
    assert row["body"] == "record 1"


def _timed_record(time: int, observed: int, stamp: str | None):
    request = factories.logs_request(records=1)
    record = request.resource_logs[0].scope_logs[0].log_records[0]
    record.time_unix_nano, record.observed_time_unix_nano = time, observed
    if stamp is not None:
        attribute = record.attributes.add(key="event.timestamp")
        attribute.value.string_value = stamp
    [(_, row)] = list(otlp.log_records(request))
    return row


def test_a_log_record_without_a_time_takes_its_observed_time_then_its_event_timestamp():
    """Codex CLI's records carry a time of 0 (issue 33): observed time, then event.timestamp."""
    stamp = "2026-12-01T09:03:58.339Z"
    at = 1_796_115_838_339_000_000
    assert _timed_record(5, 7, stamp)["time_unix_nano"] == 5
    assert _timed_record(0, at + 653_064, stamp)["time_unix_nano"] == at + 653_064
    row = _timed_record(0, 0, stamp)
    assert (row["time_unix_nano"], row["observed_time_unix_nano"]) == (at, 0)
    assert _timed_record(0, 0, "2026-12-01T09:03:58.339+00:00")["time_unix_nano"] == at
    assert _timed_record(0, 0, "not a time")["time_unix_nano"] == 0
    assert _timed_record(0, 0, "1969-12-31T23:59:59Z")["time_unix_nano"] == 0
    assert _timed_record(0, 0, None)["time_unix_nano"] == 0


def test_export_response_is_empty_on_full_success():
    assert otlp.export_response(otlp.TRACES, None, otlp.JSON) == b"{}"
    assert otlp.export_response(otlp.LOGS, None, otlp.PROTOBUF) == b""
