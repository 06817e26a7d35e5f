"""A Responses API chain (issue 33), recorded in the test from the real openai SDK under
openinference-instrumentation-openai (0.1.66) against the local fake OpenAI API: the second request sends
only its new message and ``previous_response_id``; the provider keeps the earlier turns.

What the span carries: ``previous_response_id`` in ``llm.invocation_parameters`` (and ``input.value``), the
new items only in ``llm.input_messages`` (the instructions, then the new user message), and no response id
attribute (the first response's id is only inside ``output.value``). ctxview says so in a note on the
call; it does not rebuild the window yet (the xfail test below states what rebuilding should give).
opentelemetry-instrumentation-openai (OpenLLMetry 0.62.4) records the new items only too, and nothing
naming the previous response; openai-v2 (2.4b0) does not instrument the Responses API."""

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, responses_reply, responses_usage

MODEL = "gpt-5.6"
INSTRUCTIONS = "You are a concise travel assistant."
USAGES = (responses_usage(900, 20), responses_usage(940, 15, cached_tokens=896))


def record() -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            for number, (usage, text) in enumerate(
                zip(USAGES, ("Paris: sunny.", "Lyon: rainy."), strict=True), start=1
            ):
                fake.enqueue(responses_reply(id=f"resp_{number}", model=MODEL, usage=usage, text=text))
            client = openai.OpenAI(base_url=fake.openai_base_url, api_key="test")
            with provider.get_tracer("app").start_as_current_span("conversation"):  # one run
                first = client.responses.create(
                    model=MODEL, instructions=INSTRUCTIONS, input="The weather in Paris?"
                )
                client.responses.create(
                    model=MODEL,
                    instructions=INSTRUCTIONS,
                    input=[{"role": "user", "content": "And in Lyon?"}],
                    previous_response_id=first.id,
                )
            assert (fake.errors, fake.pending) == ([], 0)
            assert "previous_response_id" not in fake.requests[0].body
            assert fake.requests[1].body["previous_response_id"] == "resp_1"
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans())


def test_the_span_names_the_previous_response_and_carries_only_the_new_items():
    calls = [span for span in record() if span.name != "conversation"]
    assert len(calls) == 2
    second = calls[1].attributes
    assert '"previous_response_id": "resp_1"' in second["llm.invocation_parameters"]
    assert [second[f"llm.input_messages.{index}.message.content"] for index in (0, 1)] == [
        INSTRUCTIONS,
        "And in Lyon?",
    ]
    assert "llm.input_messages.2.message.content" not in second
    assert not any("response.id" in key for key in second)  # the id is only inside output.value


def _calls(send_as, client, key) -> list[dict]:
    send_as(key, encode_spans(record()))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    calls = sorted(
        client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"], key=lambda call: call["seq"]
    )
    return [client.get(f"/api/v1/calls/{call['id']}", **headers).json() for call in calls]


def test_a_continued_request_says_its_window_holds_only_the_new_items(send_as, client, key):
    first, second = _calls(send_as, client, key)
    assert not any("continues" in note for note in first["notes"])
    assert [note for note in second["notes"] if "continues" in note] == [
        "the request continues previous response resp_1: the provider kept the earlier turns, so this "
        "window holds only the items the request sent (not rebuilt)"
    ]
    assert len(second["items"]) == 2
    assert second["usage"]["cache_read"] == 896  # usage as reported
    assert second["usage"]["output"] == 15


@pytest.mark.xfail(strict=True, reason="issue 33: the window is not rebuilt from the previous call yet")
def test_a_continued_requests_window_is_rebuilt_from_the_call_it_continues(send_as, client, key):
    first, second = _calls(send_as, client, key)
    assert len(second["items"]) == 4  # instructions, call 1's question, call 1's answer, the new question
    assert second["cache"]["cause"] is None  # no false cache break
