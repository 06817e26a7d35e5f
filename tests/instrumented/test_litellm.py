"""litellm's own OpenTelemetry integration (the ``otel`` callback, issue 33), recorded in the test from the
real litellm 1.110.2 against the local fake OpenAI API (``api_base`` pointed at it).

Why this integration rather than OpenInference's ``openinference-instrumentation-litellm``: it ships inside
litellm (nothing more to install), it is the one litellm's own documentation sets up
(``litellm.callbacks = ["otel"]``), and the LiteLLM proxy uses the same code, so it is what a litellm
user most likely sends.

Two requests of one conversation (a tool call, its result, the answer) inside the application's own span.
Since litellm 1.81, inside a span of the caller's litellm writes each request's attributes onto that span
(the next request's overwrite the last's) and makes no span of its own, unless
``USE_OTEL_LITELLM_REQUEST_SPAN=true``: set here, so each request has a ``litellm_request`` span (with a
``raw_gen_ai_request`` child holding the provider's raw request and response). By default (no
``OTEL_SEMCONV_STABILITY_OPT_IN``) the span has ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
``total_tokens`` and no cache figure (the provider's ``cached_tokens`` only inside the Python repr in
``metadata.usage_object``); tools as ``llm.request.functions.<i>.*``; messages as ``gen_ai.input.messages``
/ ``gen_ai.output.messages`` in the OTel parts shape, but an assistant's tool calls as an OpenAI-shaped
``tool_calls`` list beside empty ``parts``, and the response's tool call only as
``gen_ai.completion.0.function_call.name`` / ``.arguments`` (no id)."""

import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage
from tests.instrumented.test_agents import read

MODEL = "gpt-4.1"
# Long enough to be cached (about 1,270 tokens), as a real agent's instructions are.
RULES = " ".join(
    f"Rule {n}: answer in one short sentence, name the city, and give the temperature in Celsius."
    for n in range(1, 61)
)
SYSTEM = f"You answer weather questions. {RULES}"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
ANSWER = "18C and light rain in Paris."
# (prompt, cached, completion, tool call or None, text): what the fake answers, request by request.
SCRIPT = [
    (1330, 0, 20, ("call_1", "get_weather", {"city": "Paris"}), None),
    (1360, 1280, 14, None, ANSWER),
]
CALLBACK_LISTS = ("input_callback", "success_callback", "failure_callback")
ASYNC_CALLBACK_LISTS = ("_async_success_callback", "_async_failure_callback")


def record(monkeypatch) -> list:
    """The conversation through the real litellm and its ``otel`` callback: the spans it made."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm would fetch its price list
    monkeypatch.setenv("USE_OTEL_LITELLM_REQUEST_SPAN", "true")
    import litellm
    from litellm.integrations.opentelemetry import OpenTelemetry, OpenTelemetryConfig

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # What "otel" in litellm.callbacks makes, with the test's exporter and provider. litellm copies its
    # callbacks into these lists on first use: empty them so that no earlier test's logger gets the calls.
    otel = OpenTelemetry(config=OpenTelemetryConfig(exporter=exporter), tracer_provider=provider)
    for name in CALLBACK_LISTS + ASYNC_CALLBACK_LISTS:
        monkeypatch.setattr(litellm, name, [])
    monkeypatch.setattr(litellm, "callbacks", [otel])
    with FakeProvider() as fake:
        for number, (prompt, cached, completion, call, text) in enumerate(SCRIPT, start=1):
            usage = openai_usage(prompt, completion, cached_tokens=cached)
            calls = [call] if call else None
            fake.enqueue(
                openai_reply(
                    id=f"chatcmpl-ll-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls
                )
            )
        options = {"model": f"openai/{MODEL}", "tools": TOOLS, "api_base": fake.openai_base_url}
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Weather in Paris?"}]
        # The application's own span around the conversation: one trace, so one run.
        with provider.get_tracer("weather-app").start_as_current_span("weather conversation"):
            first = litellm.completion(messages=messages, api_key="sk-fake", **options)
            result = {"role": "tool", "tool_call_id": "call_1", "content": "18C, light rain"}
            messages += [first.choices[0].message.model_dump(), result]
            second = litellm.completion(messages=messages, api_key="sk-fake", **options)
        assert second.choices[0].message.content == ANSWER
        assert (fake.errors, fake.pending) == ([], 0)
    # litellm runs a synchronous call's success callbacks on a worker thread.
    deadline = time.monotonic() + 10
    while sum(span.name == "litellm_request" for span in exporter.get_finished_spans()) < 2:
        assert time.monotonic() < deadline, "litellm's callbacks did not run"
        time.sleep(0.05)
    return list(exporter.get_finished_spans())


def test_a_litellm_conversation_is_one_run_of_two_calls_with_the_usage_the_span_carries(
    monkeypatch, send_as, client, key
):
    spans = record(monkeypatch)
    names = sorted(span.name for span in spans)
    assert names == ["litellm_request"] * 2 + ["raw_gen_ai_request"] * 2 + ["weather conversation"]
    send_as(key, encode_spans(spans))
    [run] = read(client, key).values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert [call["name"] for call in calls] == ["litellm_request", "litellm_request"]  # not the raw spans
    assert [call["turn"] for call in calls] == [1, 1] and run["listed"]["turns"] == 1
    assert [call["agent"] for call in calls] == [None, None]
    for call, (prompt, _cached, completion, tool_call, _text) in zip(calls, SCRIPT, strict=True):
        # The span carries no cache figure (by default litellm leaves it out): the split is unknown.
        assert call["usage"] == {
            "uncached": None,
            "cache_write": None,
            "cache_read": None,
            "output": completion,
            "reasoning": None,
            "prompt_total": prompt,
        }, call["seq"]
        assert call["tool_definitions"] == ["get_weather"]
        assert call["finish_reasons"] == (["tool_call"] if tool_call else ["stop"])
    # The second window holds the assistant's tool call and its result.
    kinds = [(item["kind"], item["role"]) for item in calls[1]["items"]]
    assert kinds == [("tool", None), ("system", "system")] + [
        ("message", "user"), ("message", "assistant"), ("tool_result", "tool")
    ]  # fmt: skip
    # The result names the call it answers (its tool_call_id beside the parts), so get_weather is known
    # to have been called: no finding at all (it was reported unused). Left out: the first call's
    # tool_calls, which come back empty (the response's call is only in gen_ai.completion.0.function_call).
    assert [item["source"] for item in calls[1]["items"] if item["kind"] == "tool_result"] == ["get_weather"]
    assert run["findings"] == []
