"""Calls with no parent span, grouped into runs by the conversation they carry (issue 36).

An app instrumented with only ``opentelemetry-instrumentation-openai-v2`` has no span of its own: each
model call is the root span of a trace of its own. The spans here are made by the real OpenTelemetry SDK
with the attributes openai-v2 2.4b0 emits (tests/data/otlp/openai-v2-span.json), the conversation id put
in the baggage and copied onto each span as it starts (what opentelemetry-processor-baggage's
``BaggageSpanProcessor`` does; openai-v2 has no setting for it), and each span is sent in a request, and
so a batch, of its own, encoded by the SDK's OTLP encoder. tests/instrumented/test_openai_v2_alone.py
does the same with the real instrumentation against the fake provider.
"""

import json

import pytest
from opentelemetry import baggage, context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ingest.models import Run
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

CONVERSATION = "gen_ai.conversation.id"
SYSTEM = {"role": "system", "parts": [{"content": "You are a concise travel assistant.", "type": "text"}]}
QUESTION = "What's the weather in Paris?"


class BaggageSpanProcessor(SpanProcessor):
    """Copies the parent context's baggage onto each span as it starts (opentelemetry-processor-baggage)."""

    def on_start(self, span, parent_context=None) -> None:
        for name, value in baggage.get_all(parent_context).items():
            span.set_attribute(name, str(value))


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"content": text, "type": "text"}]}


def assistant(text: str) -> dict:
    return {"role": "assistant", "parts": [{"content": text, "type": "text"}], "finish_reason": "stop"}


# The conversation: turn 1 asks for a tool and reads its result, turn 2 asks again.
TOOL_CALL = {
    "role": "assistant",
    "parts": [{"arguments": {"city": "Paris"}, "name": "get_weather", "id": "call_1", "type": "tool_call"}],
    "finish_reason": "tool_calls",
}
TOOL_RESULT = {"role": "tool", "parts": [{"response": "18°C", "id": "call_1", "type": "tool_call_response"}]}
REQUESTS = [
    ([SYSTEM, user(QUESTION)], TOOL_CALL),
    ([SYSTEM, user(QUESTION), TOOL_CALL, TOOL_RESULT], assistant("18°C and light rain.")),
    (
        [SYSTEM, user(QUESTION), TOOL_CALL, TOOL_RESULT, assistant("18°C."), user("An umbrella?")],
        assistant("Yes."),
    ),
]


def openai_v2_spans(conversation: str | None, service: str = "openai-v2-app") -> list:
    """The conversation's three chat spans, as openai-v2 makes them in an app with no span of its own."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BaggageSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("opentelemetry.util.genai.handler", "1.1b0")
    token = context.attach(baggage.set_baggage(CONVERSATION, conversation)) if conversation else None
    for number, (messages, output) in enumerate(REQUESTS, 1):
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1-mini",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.temperature": 0.2,
            "gen_ai.response.finish_reasons": [output["finish_reason"]],
            "gen_ai.response.model": "gpt-4.1-mini-2025-04-14",
            "gen_ai.response.id": f"chatcmpl-{number}",
            "gen_ai.usage.input_tokens": 1000 + 100 * number,
            "gen_ai.usage.output_tokens": 40 + number,
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps([output]),
            "openai.response.service_tier": "default",
            "openai.response.system_fingerprint": "fp_fake",
        }
        with tracer.start_as_current_span("chat gpt-4.1-mini", kind=SpanKind.CLIENT, attributes=attributes):
            pass
    if token is not None:
        context.detach(token)
    provider.shutdown()
    spans = sorted(memory.get_finished_spans(), key=lambda span: span.start_time)
    assert all(span.parent is None for span in spans) and len({span.context.trace_id for span in spans}) == 3
    return spans


def trace_id(span) -> str:
    return format(span.context.trace_id, "032x")


@pytest.mark.django_db
def test_calls_without_a_parent_that_share_a_conversation_are_one_run(send):  # noqa: F811
    spans = openai_v2_spans("conv-paris")
    for span in (spans[2], spans[0], spans[1]):  # each in a batch of its own, out of order
        send(encode_spans([span]))
    run = Run.objects.get()
    assert (run.key, run.key_source, run.service_name) == ("conv-paris", CONVERSATION, "openai-v2-app")
    calls = list(run.calls.order_by("seq").values_list("seq", "turn", "trace_id", "parent_span_id"))
    assert calls == [
        (number, turn, trace_id(span), "")
        for number, turn, span in zip((1, 2, 3), (1, 1, 2), spans, strict=True)
    ]
    assert (run.call_count, run.turn_count, run.analysed_seq) == (3, 2, 3)
    assert run.title == QUESTION


@pytest.mark.django_db
def test_without_a_conversation_each_call_without_a_parent_is_a_run_of_its_own(send):  # noqa: F811
    spans = openai_v2_spans(None)
    for span in spans:
        send(encode_spans([span]))
    runs = Run.objects.order_by("started_at")
    assert [(run.key, run.key_source, run.call_count) for run in runs] == [
        (trace_id(span), "trace_id", 1) for span in spans
    ]


@pytest.mark.django_db
def test_two_conversations_sent_interleaved_are_two_runs(send):  # noqa: F811
    first, second = openai_v2_spans("conv-a"), openai_v2_spans("conv-b")
    for pair in zip(first, second, strict=True):
        send(encode_spans(list(pair)))  # a batch holding a call of each
    runs = {run.key: run for run in Run.objects.all()}
    assert sorted(runs) == ["conv-a", "conv-b"]
    for run in runs.values():
        assert list(run.calls.order_by("seq").values_list("seq", "turn")) == [(1, 1), (2, 1), (3, 2)]


@pytest.mark.django_db
def test_calls_under_a_root_span_are_still_keyed_by_their_trace(send):  # noqa: F811
    """An app span around each turn, no conversation id: each turn's trace is a run, as before."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.app")
    for turn in (1, 2):
        with tracer.start_as_current_span("agent turn"):
            with tracer.start_as_current_span("chat gpt-4.1-mini", kind=SpanKind.CLIENT) as span:
                span.set_attribute("gen_ai.operation.name", "chat")
                span.set_attribute("gen_ai.input.messages", json.dumps([user(f"question {turn}")]))
    provider.shutdown()
    send(encode_spans(memory.get_finished_spans()))
    runs = Run.objects.order_by("started_at")
    assert [(run.key_source, run.call_count, run.title) for run in runs] == [
        ("trace_id", 1, "question 1"),
        ("trace_id", 1, "question 2"),
    ]
