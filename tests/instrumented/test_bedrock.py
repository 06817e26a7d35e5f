"""Bedrock Converse through OpenInference (issue 33, item 4), recorded in the test from the real boto3 and
openinference-instrumentation-bedrock against a local fake of the Converse API.

0.1.60 of the instrumentation began folding cache reads and writes into ``llm.token_count.prompt``
(0.1.59 and before: ``inputTokens`` alone, which excludes them); ctxview read the new figure as the
uncached part and added the cache again. Its tool definitions are Converse's tagged union
(``{"toolSpec": {...}}``, with a ``{"cachePoint": ...}`` entry among them), which came back as empty
names, and a call that used a tool was said to call an unknown one."""

import boto3
import pytest
from openinference.instrumentation import bedrock as bedrock_instrumentation
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, converse_reply

MODEL = "anthropic.claude-sonnet-4-5-v1:0"
# What the fake answers, request by request: (inputTokens, cacheReadInputTokens, cacheWriteInputTokens,
# outputTokens), the first answer asking for the weather tool, the second the final text.
USAGE = [(1747, 0, 1733, 31), (14, 1733, 40, 12)]
TOOLS = [
    {
        "toolSpec": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "inputSchema": {"json": {"type": "object", "properties": {"city": {"type": "string"}}}},
        }
    },
    {"cachePoint": {"type": "default"}},
]


@pytest.fixture
def converse_endpoint(monkeypatch):
    """The fake, answering the two requests: the weather tool asked for, then the final text."""
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        monkeypatch.setenv(name, value)
    with FakeProvider() as fake:
        (fresh, read, written, output), (fresh2, read2, written2, output2) = USAGE
        fake.enqueue(
            converse_reply(
                model=MODEL, input_tokens=fresh, output_tokens=output, cache_read=read, cache_write=written,
                tool_calls=[("tu1", "get_weather", {"city": "Paris"})],
            ),
            converse_reply(
                model=MODEL, input_tokens=fresh2, output_tokens=output2, cache_read=read2,
                cache_write=written2, text="18°C and light rain in Paris.",
            ),
        )  # fmt: skip
        yield fake


def record_two_calls(endpoint: str) -> list:
    """A tool round trip through the real client and instrumentation: the spans it made."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = bedrock_instrumentation.BedrockInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = boto3.client("bedrock-runtime", region_name="us-east-1", endpoint_url=endpoint)
    system = [{"text": "You answer weather questions."}]
    messages = [{"role": "user", "content": [{"text": "Weather in Paris?"}]}]
    result = {"toolResult": {"toolUseId": "tu1", "content": [{"text": "18°C, light rain"}]}}
    try:
        # The application's own span around the conversation: one trace, so one run.
        with provider.get_tracer("weather-app").start_as_current_span("weather conversation"):
            first = client.converse(
                modelId=MODEL, messages=messages, system=system, toolConfig={"tools": TOOLS}
            )
            messages += [first["output"]["message"], {"role": "user", "content": [result]}]
            client.converse(modelId=MODEL, messages=messages, system=system, toolConfig={"tools": TOOLS})
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans())


def test_bedrock_converse_figures_and_tools_come_back_as_the_provider_sent_them(
    converse_endpoint, send_as, client, key
):
    fake = converse_endpoint
    spans = record_two_calls(fake.url)
    assert (fake.errors, fake.pending, len(fake.requests)) == ([], 0, 2)
    scope = spans[0].instrumentation_scope
    assert (scope.name, scope.version) == ("openinference.instrumentation.bedrock", "0.1.61")
    send_as(key, encode_spans(spans))

    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    runs = client.get("/api/v1/runs", **headers).json()["runs"]
    [run] = runs
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"]
    assert len(calls) == 2
    for call, (fresh, read, written, output) in zip(calls, USAGE, strict=True):
        assert call["usage"] == {
            "uncached": fresh,
            "cache_write": written,
            "cache_read": read,
            "output": output,
            "reasoning": None,
            "prompt_total": fresh + read + written,
        }, call["seq"]
        detail = client.get(f"/api/v1/calls/{call['id']}", **headers).json()
        assert detail["tool_definitions"] == ["get_weather"]
    findings = client.get(f"/api/v1/runs/{run['id']}/findings", **headers).json()["findings"]
    assert [f for f in findings if f["type"] == "unknown_tool_called"] == []
