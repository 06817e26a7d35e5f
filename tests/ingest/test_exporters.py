"""The real OTLP exporters of the OpenTelemetry Python SDK against the live test server."""

import pytest
from opentelemetry.exporter.otlp.common.http import Compression
from opentelemetry.exporter.otlp.json.http._log_exporter import OTLPLogExporter as JsonLogExporter
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.models import LogRecord, RawBatch, Span
from tests import otel


def span_exporter(cls, live_server, key, compression=Compression.NONE):
    return cls(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=compression,
        timeout=10,
    )


@pytest.mark.parametrize(
    "exporter_class, compression, stored_as",
    [
        (OTLPSpanExporter, Compression.NONE, "protobuf"),
        (OTLPSpanExporter, Compression.GZIP, "protobuf"),
        (OTLPSpanExporter, Compression.DEFLATE, "protobuf"),
        (JsonSpanExporter, Compression.NONE, "json"),
        (JsonSpanExporter, Compression.GZIP, "json"),
    ],
    ids=["protobuf", "protobuf-gzip", "protobuf-deflate", "json", "json-gzip"],
)
def test_the_sdk_span_exporter_delivers_every_span(
    live_server, project, key, exporter_class, compression, stored_as
):
    spans = otel.agent_spans(calls=3)
    exporter = span_exporter(exporter_class, live_server, key, compression)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()

    assert RawBatch.objects.get().content_type == stored_as
    stored = {row.span_id: row for row in Span.objects.filter(project=project)}
    assert set(stored) == {format(span.context.span_id, "016x") for span in spans}
    chat = stored[format(spans[0].context.span_id, "016x")]
    assert chat.name == "chat model-1"
    assert chat.trace_id == format(spans[0].context.trace_id, "032x")
    assert chat.parent_span_id == format(spans[-1].context.span_id, "016x")
    assert chat.kind == 1  # INTERNAL
    assert chat.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": 1000,
        "gen_ai.response.finish_reasons": ["stop"],
    }
    assert chat.events[0]["name"] == "gen_ai.content.prompt"
    assert chat.events[0]["attributes"] == {"gen_ai.prompt": "question 1"}
    assert (chat.scope_name, chat.scope_version) == ("tests.otel", "1.0")
    assert chat.resource.service_name == "exporter-test"
    assert chat.start_time_unix_nano == spans[0].start_time


@pytest.mark.parametrize("exporter_class", [OTLPLogExporter, JsonLogExporter], ids=["protobuf", "json"])
def test_the_sdk_log_exporter_delivers_every_record(live_server, project, key, exporter_class):
    spans = otel.agent_spans(calls=1)
    records = otel.content_log_records(count=2, span=spans[0])
    exporter = exporter_class(
        endpoint=f"{live_server.url}/v1/logs", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    assert exporter.export(records) == LogRecordExportResult.SUCCESS
    exporter.shutdown()

    stored = list(LogRecord.objects.filter(project=project).order_by("time_unix_nano"))
    assert len(stored) == 2
    assert stored[0].event_name == "gen_ai.client.inference.operation.details"
    assert stored[0].span_id == format(spans[0].context.span_id, "016x")
    assert stored[0].trace_id == format(spans[0].context.trace_id, "032x")
    assert stored[0].body == {
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "q1"}]}]
    }


def test_the_sdk_exporter_sends_the_same_spans_twice_and_they_are_stored_once(live_server, key):
    spans = otel.agent_spans(calls=2)
    exporter = span_exporter(OTLPSpanExporter, live_server, key)
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    assert RawBatch.objects.count() == 2
    assert Span.objects.count() == 3


def test_the_sdk_exporter_fails_without_retrying_on_a_wrong_key(live_server, key):
    exporter = span_exporter(OTLPSpanExporter, live_server, "cvk_000000000000_wrong")
    assert exporter.export(otel.agent_spans(calls=1)) == SpanExportResult.FAILURE
    assert RawBatch.objects.count() == 0
