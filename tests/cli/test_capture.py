"""The capturing OTLP/HTTP receiver, fed by the real exporters of the OpenTelemetry Python SDK."""

import gzip
import http.client
import json

import pytest
from opentelemetry.exporter.otlp.common.http import Compression
from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter as JsonLogExporter
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from tests import otel
from tests.cli.capture import CaptureReceiver


@pytest.fixture
def receiver():
    with CaptureReceiver() as running:
        yield running


@pytest.mark.parametrize(
    "exporter_class, compression, content_type",
    [
        (OTLPSpanExporter, Compression.NONE, "application/x-protobuf"),
        (OTLPSpanExporter, Compression.GZIP, "application/x-protobuf"),
        (JsonSpanExporter, Compression.NONE, "application/json"),
        (JsonSpanExporter, Compression.GZIP, "application/json"),
    ],
    ids=["protobuf", "protobuf-gzip", "json", "json-gzip"],
)
def test_keeps_each_span_export_as_received_and_as_otlp_json(
    receiver, exporter_class, compression, content_type
):
    spans = otel.agent_spans(calls=2)
    exporter = exporter_class(endpoint=f"{receiver.url}/v1/traces", compression=compression, timeout=10)

    assert exporter.export(spans) == SpanExportResult.SUCCESS

    [capture] = receiver.captures
    assert (capture.signal, capture.content_type, capture.error) == ("traces", content_type, None)
    assert capture.content_encoding == ("gzip" if compression == Compression.GZIP else "")
    if compression == Compression.GZIP:
        assert capture.raw[:2] == b"\x1f\x8b"  # kept as received, still compressed
    [document] = receiver.documents("traces")
    received = [span for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]
    assert sorted((s["traceId"], s["spanId"], s["name"]) for s in received) == sorted(
        (f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}", s.name) for s in spans
    )
    assert {s["kind"] for s in received} <= {1, 2, 3}  # enums as numbers, as OTLP/JSON wants


@pytest.mark.parametrize("exporter_class", [OTLPLogExporter, JsonLogExporter], ids=["protobuf", "json"])
def test_keeps_each_log_export(receiver, exporter_class):
    records = otel.content_log_records(count=3)
    exporter = exporter_class(endpoint=f"{receiver.url}/v1/logs", timeout=10)

    assert exporter.export(records) == LogRecordExportResult.SUCCESS

    [document] = receiver.documents("logs")
    received = [r for rl in document["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]
    assert len(received) == len(records) == 3
    assert {r["eventName"] for r in received} == {"gen_ai.client.inference.operation.details"}


def test_reads_a_chunked_gzip_body_as_nodes_exporters_send_it(receiver):
    spans = otel.agent_spans(calls=1)
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": f"{s.context.trace_id:032x}",
                                "spanId": f"{s.context.span_id:016x}",
                                "name": s.name,
                            }
                            for s in spans
                        ]
                    }
                ]
            }
        ]
    }
    body = gzip.compress(json.dumps(document).encode())
    connection = http.client.HTTPConnection(receiver.url.removeprefix("http://"), timeout=10)
    pieces = [body[:10], body[10:]]
    connection.request(
        "POST",
        "/v1/traces",
        body=iter(pieces),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        encode_chunked=True,
    )
    response = connection.getresponse()

    assert (response.status, response.read()) == (200, b"{}")
    [capture] = receiver.captures
    assert capture.raw == body and capture.error is None
    names = [s["name"] for s in capture.document["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert names == [s.name for s in spans]


def test_keeps_a_body_it_cannot_decode_and_answers_400_with_the_reason(receiver):
    connection = http.client.HTTPConnection(receiver.url.removeprefix("http://"), timeout=10)
    connection.request("POST", "/v1/logs", body=b"not json", headers={"Content-Type": "application/json"})
    response = connection.getresponse()

    assert response.status == 400
    assert "not valid JSON" in json.loads(response.read())["message"]
    [capture] = receiver.captures
    assert capture.raw == b"not json" and capture.document is None
    assert receiver.errors == [f"/v1/logs: {capture.error}"]
