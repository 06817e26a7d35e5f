"""An app instrumented with only opentelemetry-instrumentation-openai-v2: no span of its own.

    python -m tests.instrumented.openai_v2_alone --endpoint http://127.0.0.1:8000 --key cvk_... \
        [--conversation ID]

Holds the shared conversation (tests/instrumented/README.md: two user turns, three calls) through the real
openai SDK and the real openai-v2 instrumentation (SPAN_ONLY content) against the local fake provider, with
no span around the calls: each call is the root span of a trace of its own. With ``--conversation``, the
id goes in the baggage and a span processor copies the baggage onto every span as it starts, as
opentelemetry-processor-baggage's ``BaggageSpanProcessor`` does (that package is not in the venv; openai-v2
has no way of its own to name a conversation). Each span is exported by the real OTLP/HTTP exporter as
soon as it ends (``SimpleSpanProcessor``), so every call arrives in a request, and a batch, of its own.

Prints one line ``CTXVIEW-SCENARIO-RESULT <json>``: the fake's requests and errors, and each exported
span's trace, span and parent ids.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from tests.instrumented import fake_providers as fp
from tests.instrumented.run import SAFETY_ENV, drive_openai_sdk, scripted_replies
from tests.instrumented.scenarios import RESULT_MARKER, SCENARIOS, child_environment

SCENARIO = SCENARIOS["openai-v2-span"]  # its calls, replies and environment; only the app span differs
CONVERSATION_KEY = "gen_ai.conversation.id"


class NoAppSpan:
    """A tracer for ``drive_openai_sdk`` that opens no span around a turn: the app has none."""

    def start_as_current_span(self, *args, **kwargs):
        return contextlib.nullcontext()


def baggage_processor():
    """Copies the parent context's baggage onto each span as it starts (BaggageSpanProcessor)."""
    from opentelemetry import baggage
    from opentelemetry.sdk.trace import SpanProcessor

    class BaggageSpanProcessor(SpanProcessor):
        def on_start(self, span, parent_context=None) -> None:
            for name, value in baggage.get_all(parent_context).items():
                span.set_attribute(name, str(value))

    return BaggageSpanProcessor()


def run(endpoint: str, key: str, conversation: str | None) -> dict:
    from opentelemetry import baggage, context
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "openai-v2-alone"}))
    provider.add_span_processor(baggage_processor())  # before the exporters: they see what it sets
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    exporter = OTLPSpanExporter(
        endpoint=f"{endpoint.rstrip('/')}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    token = context.attach(baggage.set_baggage(CONVERSATION_KEY, conversation)) if conversation else None
    error = None
    with fp.FakeProvider(scripted_replies(SCENARIO)) as fake:
        try:
            drive_openai_sdk(SCENARIO, fake, NoAppSpan())
        except Exception as exc:  # reported, then the process exits 1
            error = f"{type(exc).__name__}: {exc}"
    if token is not None:
        context.detach(token)
    provider.shutdown()
    spans = sorted(memory.get_finished_spans(), key=lambda span: span.start_time)
    return {
        "error": error,
        "fake_errors": fake.errors,
        "pending_replies": fake.pending,
        "spans": [
            {
                "name": span.name,
                "trace_id": format(span.context.trace_id, "032x"),
                "span_id": format(span.context.span_id, "016x"),
                "parent_span_id": format(span.parent.span_id, "016x") if span.parent else "",
                "conversation": (span.attributes or {}).get(CONVERSATION_KEY),
            }
            for span in spans
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.instrumented.openai_v2_alone")
    parser.add_argument("--endpoint", required=True, help="ctxview base URL")
    parser.add_argument("--key", required=True, help="ingest key")
    parser.add_argument("--conversation", help="a conversation id, carried in the baggage")
    args = parser.parse_args(argv)
    os.environ.clear()
    os.environ.update(child_environment() | SAFETY_ENV | SCENARIO.env)
    result = run(args.endpoint, args.key, args.conversation)
    print(RESULT_MARKER + json.dumps(result), flush=True)
    return 1 if result["error"] or result["fake_errors"] or result["pending_replies"] else 0


if __name__ == "__main__":
    sys.exit(main())
