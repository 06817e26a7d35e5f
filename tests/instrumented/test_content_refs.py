"""Content stored elsewhere and referenced (issue 33): opentelemetry-instrumentation-openai-v2 with
opentelemetry-util-genai's ``upload`` completion hook and no content on the span, recorded in the test
from the real packages against the local fake OpenAI API. The span carries ``gen_ai.input.messages_ref``
and ``gen_ai.output.messages_ref`` (file paths) instead of the messages: the call says that its content
was referenced, and where, instead of asking for capture to be turned on."""

import openai
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "upload")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", tmp_path.as_uri())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            fake.enqueue(openai_reply(id="c1", model="gpt-4.1", usage=openai_usage(100, 5), text="Hi."))
            client = openai.OpenAI(base_url=fake.openai_base_url, api_key="test")
            messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
            client.chat.completions.create(model="gpt-4.1", messages=messages)
            assert (fake.errors, fake.pending) == ([], 0)
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans()), tmp_path


def test_content_stored_elsewhere_is_said_to_be_referenced_and_where(recorded, send_as, client, key):
    spans, folder = recorded
    [span] = spans
    assert "gen_ai.input.messages" not in span.attributes
    reference = span.attributes["gen_ai.input.messages_ref"]
    assert reference.startswith(folder.as_uri())
    send_as(key, encode_spans(spans))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    [call] = client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"]
    assert call["notes"] == [
        "content referenced, not captured: stored elsewhere (gen_ai.input.messages_ref: "
        f"{reference}); ctxview does not fetch it"
    ]
