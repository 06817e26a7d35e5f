"""OpenAI's own cache diagnosis (``prompt_cache_diagnostics`` of a Responses object, issue 33), recorded in
the test from the real openai SDK under openinference-instrumentation-openai against the local fake
OpenAI API, which answers as GPT-5.6 does when asked to compare with an earlier response.

The second request adds a tool: the provider says ``tools_changed`` and how many tokens it could not
reuse; ctxview shows that beside its own cause (``tools_changed``: they agree). The third request
changes the instructions and the fake says ``input_changed`` (instructions and input are one input to
OpenAI): it agrees with ctxview's ``system_changed``."""

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, responses_reply

MODEL = "gpt-5.6"
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
CLOCK = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
INSTRUCTIONS = "You are a concise travel assistant. " * 150
# (instructions, tools, prompt, cached, diagnosis the fake returns)
SCRIPT = [
    (INSTRUCTIONS, [WEATHER], 2000, 0, None),
    (
        INSTRUCTIONS,
        [WEATHER, CLOCK],
        2050,
        0,
        {"type": "cache_miss", "reason": "tools_changed", "cache_missed_tokens": 1900},
    ),
    (
        "Be brief. " + INSTRUCTIONS,
        [WEATHER, CLOCK],
        2060,
        0,
        {"type": "cache_miss", "reason": "input_changed", "cache_missed_tokens": 1950},
    ),
]


def usage(prompt: int, cached: int) -> dict:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + 12,
    }


def record() -> list:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            for number, (_, _, prompt, cached, diagnosis) in enumerate(SCRIPT, start=1):
                reply = responses_reply(
                    id=f"resp_{number}", model=MODEL, usage=usage(prompt, cached), text="ok"
                )
                if diagnosis is not None:
                    reply.body["prompt_cache_diagnostics"] = diagnosis
                fake.enqueue(reply)
            client = openai.OpenAI(base_url=fake.openai_base_url, api_key="test")
            with provider.get_tracer("app").start_as_current_span("conversation"):  # one run
                converse(client)
            assert (fake.errors, fake.pending) == ([], 0)
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans())


def converse(client) -> None:
    """The three requests, each asking to be compared with the one before."""
    previous = None
    for instructions, tools, *_ in SCRIPT:
        options = {"comparison_response_id": previous} if previous else {}
        response = client.responses.create(
            model=MODEL,
            instructions=instructions,
            input="The weather in Paris?",
            tools=tools,
            extra_body={"prompt_cache_options": options} if options else None,
        )
        previous = response.id


def test_openais_cache_diagnosis_is_shown_beside_ctxviews_cause(send_as, client, key, alice):
    send_as(key, encode_spans(record()))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    calls = sorted(
        client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"], key=lambda call: call["seq"]
    )
    caches = [client.get(f"/api/v1/calls/{call['id']}", **headers).json()["cache"] for call in calls]
    assert [(cache["cause"], cache["provider_diagnosis"], cache["disagrees"]) for cache in caches] == [
        (None, None, None),
        ("tools_changed", "tools_changed", False),
        ("system_changed", "input_changed", False),
    ]
    client.force_login(alice)
    page = client.get(f"/calls/{calls[1]['id']}/")
    assert page.status_code == 200
    assert "The provider's own diagnosis: <code>tools_changed</code>, about 1,900 tokens" in page.text
