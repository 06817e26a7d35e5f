"""Sample runs for the demo, sent through the real OTLP exporter of the OpenTelemetry SDK."""

import json

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_SYSTEM = "You are the on-call assistant for the payments team. File tickets under employee 4417."
_TOOLS = [
    {"type": "function", "name": "query_metrics", "description": "Query service metrics."},
    {"type": "function", "name": "search_logs", "description": "Search recent logs."},
]


def _messages(turn: int) -> list[dict]:
    messages = []
    for number in range(1, turn + 1):
        messages.append(
            {"role": "user", "parts": [{"type": "text", "content": f"Status of pay-shard-{number}?"}]}
        )
        if number < turn:
            messages.append(
                {"role": "assistant", "parts": [{"type": "text", "content": f"Shard {number} is healthy."}]}
            )
    return messages


def send(url: str, key: str, turns: int = 6) -> int:
    """Send one small sample agent run (a chat span per turn) and return how many spans were sent."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "oncall-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("ctxview.demo")
    with tracer.start_as_current_span(
        "invoke_agent oncall", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for turn in range(1, turns + 1):
            with tracer.start_as_current_span("chat claude-sonnet-4-5") as span:
                span.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "anthropic",
                        "gen_ai.request.model": "claude-sonnet-4-5",
                        "gen_ai.conversation.id": "demo-oncall-sample",
                        "gen_ai.usage.input_tokens": 1800 + 60 * turn,
                        "gen_ai.usage.cache_read.input_tokens": 1700 if turn > 1 else 0,
                        "gen_ai.usage.cache_creation.input_tokens": 100 + 60 * turn if turn > 1 else 1800,
                        "gen_ai.usage.output_tokens": 120,
                        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": _SYSTEM}]),
                        "gen_ai.tool.definitions": json.dumps(_TOOLS),
                        "gen_ai.input.messages": json.dumps(_messages(turn)),
                    }
                )
    provider.shutdown()
    spans = memory.get_finished_spans()
    exporter = OTLPSpanExporter(
        endpoint=f"{url.rstrip('/')}/v1/traces",
        headers={"Authorization": f"Bearer {key}"},
        compression=Compression.Gzip,
        timeout=30,
    )
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result.name != "SUCCESS":
        raise RuntimeError(f"exporting the demo spans to {url} failed")
    return len(spans)
