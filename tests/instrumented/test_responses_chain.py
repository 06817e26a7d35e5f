"""A Responses API chain (issue 33), recorded in the test from the real openai SDK under
openinference-instrumentation-openai (0.1.66) against the local fake OpenAI API: a request after the first
sends only its new message and ``previous_response_id``; the provider keeps the earlier turns.

What the span carries: ``previous_response_id`` in ``llm.invocation_parameters`` (and ``input.value``), the
new items only in ``llm.input_messages`` (the instructions, then the new user message), and no response id
attribute (a response's id is only inside ``output.value``). ctxview reads the id there, keeps each call's
answer, and rebuilds a continuing call's window from the call that answered the response it names, in
whatever order their spans arrive; it says so in a note on the call. Where no call answered it, the window
holds the items the request sent, and the note says that.
opentelemetry-instrumentation-openai (OpenLLMetry 0.62.4) records the new items only too, and nothing
naming the previous response; openai-v2 (2.4b0) does not instrument the Responses API."""

import json

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxcore.vocabulary import digest, render
from tests.instrumented.fake_providers import FakeProvider, responses_reply, responses_usage

MODEL = "gpt-5.6"
INSTRUCTIONS = "You are a concise travel assistant."
QUESTIONS = ("The weather in Paris?", "And in Lyon?", "And in Nice?")
ANSWERS = ("Paris: sunny.", "Lyon: rainy.", "Nice: windy.")
USAGES = (
    responses_usage(900, 20),
    responses_usage(940, 15, cached_tokens=896),
    responses_usage(975, 12, cached_tokens=896),
)


def record(requests: int = 2, continues: str = "") -> list:
    """The spans of a chain of ``requests`` in one trace (one run), each continuing the response before
    it; the first continues ``continues`` (a response of no call here) when given."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            for number in range(requests):
                fake.enqueue(
                    responses_reply(
                        id=f"resp_{number + 1}", model=MODEL, usage=USAGES[number], text=ANSWERS[number]
                    )
                )
            client = openai.OpenAI(base_url=fake.openai_base_url, api_key="test")
            previous = continues
            with provider.get_tracer("app").start_as_current_span("conversation"):  # one run
                for number in range(requests):
                    question = QUESTIONS[number]
                    response = client.responses.create(
                        model=MODEL,
                        instructions=INSTRUCTIONS,
                        input=[{"role": "user", "content": question}] if previous else question,
                        **({"previous_response_id": previous} if previous else {}),
                    )
                    previous = response.id
            assert (fake.errors, fake.pending) == ([], 0)
            sent = [request.body.get("previous_response_id") for request in fake.requests]
            assert sent == [continues or None] + [f"resp_{number}" for number in range(1, requests)]
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


def _calls(send_as, client, key, *sends: list) -> list[dict]:
    """Send each list of spans in a request of its own; the run's calls as the API serves them."""
    for spans in sends:
        send_as(key, encode_spans(spans))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    calls = sorted(
        client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"], key=lambda call: call["seq"]
    )
    return [client.get(f"/api/v1/calls/{call['id']}?content=1", **headers).json() for call in calls]


def _message(role: str, text: str) -> tuple[str, str, str]:
    """(id, role, text) of a message item: its id is the hash of the message as derived from any span."""
    rendered = render({"role": role, "parts": [{"type": "text", "content": text}]})
    return f"msg:{digest(rendered)[:12]}", role, text


def _items(call: dict) -> list[tuple[str, str, str]]:
    return [
        (item["id"], item["role"], json.loads(item["content"])["parts"][0]["content"])
        for item in call["items"]
    ]


def _continued_note(call: dict) -> list[str]:
    return [note for note in call["notes"] if note.startswith("the request continues")]


def _rebuilt_note(response_id: str, call: dict) -> list[str]:
    return [
        f"the request continues previous response {response_id}: the provider kept the earlier turns; this "
        f"window was rebuilt from the call that answered it (span {call['span_id']}): its window and answer, "
        "then the items the request sent"
    ]


INSTRUCTED = _message("system", INSTRUCTIONS)
ASKED = [_message("user", question) for question in QUESTIONS]
ANSWERED = [_message("assistant", answer) for answer in ANSWERS]


def test_a_continued_requests_window_is_rebuilt_from_the_call_it_continues(send_as, client, key):
    first, second = _calls(send_as, client, key, record())
    assert _items(first) == [INSTRUCTED, ASKED[0]]
    assert _continued_note(first) == []
    # The instructions, call 1's question and answer, the new question: call 1's window is its prefix.
    assert _items(second) == [INSTRUCTED, ASKED[0], ANSWERED[0], ASKED[1]]
    assert _continued_note(second) == _rebuilt_note("resp_1", first)
    assert second["cache"]["cause"] is None  # no false cache break
    assert second["usage"]["cache_read"] == 896  # usage as reported
    assert second["usage"]["output"] == 15


def test_a_chain_of_three_requests_rebuilds_every_turn_into_the_last_window(send_as, client, key):
    first, second, third = _calls(send_as, client, key, record(requests=3))
    assert _items(third) == [INSTRUCTED, ASKED[0], ANSWERED[0], ASKED[1], ANSWERED[1], ASKED[2]]
    assert _continued_note(third) == _rebuilt_note("resp_2", second)
    assert [call["cache"]["cause"] for call in (first, second, third)] == [None, None, None]


def test_a_request_stored_before_the_call_it_continues_is_rebuilt_when_that_call_arrives(
    send_as, client, key
):
    first_span, second_span, conversation = record()
    [alone] = _calls(send_as, client, key, [second_span])
    assert _items(alone) == [INSTRUCTED, ASKED[1]]
    assert _continued_note(alone) == [
        "the request continues previous response resp_1: the provider kept the earlier turns, so this "
        "window holds only the items the request sent (not rebuilt)"
    ]
    first, second = _calls(send_as, client, key, [first_span, conversation])
    assert _items(first) == [INSTRUCTED, ASKED[0]]
    assert _items(second) == [INSTRUCTED, ASKED[0], ANSWERED[0], ASKED[1]]
    assert _continued_note(second) == _rebuilt_note("resp_1", first)
    assert second["cache"]["cause"] is None  # analysed again with its rebuilt window


def test_a_request_continuing_a_response_no_call_answered_keeps_the_items_it_sent(send_as, client, key):
    [alone] = _calls(send_as, client, key, record(requests=1, continues="resp_elsewhere"))
    assert _items(alone) == [INSTRUCTED, ASKED[0]]
    assert _continued_note(alone) == [
        "the request continues previous response resp_elsewhere: the provider kept the earlier turns, so "
        "this window holds only the items the request sent (not rebuilt)"
    ]
    assert alone["cache"]["cause"] is None
