"""Telemetry made by the real OpenTelemetry SDK, for tests that export it with the real exporters."""

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, set_span_in_context


def agent_spans(calls: int = 2, service: str = "exporter-test"):
    """An ``invoke_agent`` span with ``calls`` chat spans under it, as finished SDK spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.otel", "1.0")
    with tracer.start_as_current_span(
        "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for number in range(1, calls + 1):
            with tracer.start_as_current_span(f"chat model-{number}") as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("gen_ai.usage.input_tokens", 1000 * number)
                span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
                span.add_event("gen_ai.content.prompt", {"gen_ai.prompt": f"question {number}"})
    provider.shutdown()
    return memory.get_finished_spans()


def content_log_records(count: int = 2, span=None):
    """GenAI content events as finished SDK log records, tied to ``span`` when given."""
    memory = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=Resource.create({"service.name": "exporter-test"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
    logger = provider.get_logger("tests.otel")
    context = set_span_in_context(NonRecordingSpan(span.context)) if span is not None else None
    for number in range(1, count + 1):
        logger.emit(
            event_name="gen_ai.client.inference.operation.details",
            body={
                "gen_ai.input.messages": [
                    {"role": "user", "parts": [{"type": "text", "content": f"q{number}"}]}
                ]
            },
            attributes={"gen_ai.operation.name": "chat"},
            context=context,
        )
    provider.shutdown()
    return memory.get_finished_logs()
