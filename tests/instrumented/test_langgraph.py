"""LangGraph under OpenInference (issue 33), recorded in the test from the real langgraph 1.2.24,
langchain-openai 1.8.1 and openinference-instrumentation-langchain 0.1.80 against the local fake OpenAI API.

A prebuilt ReAct agent (``create_react_agent``, named ``weather_agent``) with one tool and a checkpointer:
the first user message takes a tool call and an answer, the second (same ``thread_id``) one answer. Each
``invoke`` is a trace of its own; the instrumentation copies the ``thread_id`` to every span as
``session.id``. It marks as AGENT both the graph's root span (``weather_agent``) and, once per step, the
graph's model node (``agent``), under which the ``ChatOpenAI`` LLM span sits (``llm.tools.<i>`` in the
provider's shape, ``llm.token_count.prompt_details.cache_read``, no completion details).

With a steady system prompt there is no finding; with one that names the user turn (first), the second
turn's request is the one break (``volatile_system_prompt``), against the request before it."""

import pytest
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage
from tests.instrumented.test_agents import read

pytestmark = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")

MODEL = "gpt-4.1"
MESSAGES = ["Weather in Paris?", "Should I take an umbrella?"]
ANSWERS = ["18C and light rain in Paris.", "Yes, take an umbrella."]
# (prompt, cached, completion, tool call or None, text): what the fake answers, request by request. Each
# request reads the one before it from the cache (OpenAI caches from 1,024 tokens on, in steps of 128).
STEADY = [
    (1330, 0, 20, ("call_1", "get_weather", {"city": "Paris"}), None),
    (1360, 1280, 14, None, ANSWERS[0]),
    (1395, 1280, 8, None, ANSWERS[1]),
]
# The same, with a system prompt that names the user turn: the second turn's request starts with another
# system prompt, so the provider reads nothing from the cache (tools alone are below the minimum).
VOLATILE = STEADY[:2] + [(1395, 0, 8, None, ANSWERS[1])]


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "18C, light rain"


# Long enough to be cached (about 1,270 tokens), as a real agent's instructions are.
RULES = " ".join(
    f"Rule {n}: answer in one short sentence, name the city, and give the temperature in Celsius."
    for n in range(1, 61)
)


def steady_prompt(state) -> list:
    return [SystemMessage(f"You answer weather questions. {RULES}"), *state["messages"]]


def volatile_prompt(state) -> list:
    turn = sum(message.type == "human" for message in state["messages"])
    return [SystemMessage(f"User turn {turn}. You answer weather questions. {RULES}"), *state["messages"]]


def record(monkeypatch, script, prompt) -> tuple[list, list]:
    """The conversation through the real graph and instrumentation: its spans and the requests made."""
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            for number, (prompt_tokens, cached, completion, call, text) in enumerate(script, start=1):
                usage = openai_usage(prompt_tokens, completion, cached_tokens=cached)
                calls = [call] if call else None
                fake.enqueue(
                    openai_reply(
                        id=f"chatcmpl-lg-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls
                    )
                )
            llm = ChatOpenAI(model=MODEL, base_url=fake.openai_base_url, api_key="sk-fake", max_retries=0)
            agent = create_react_agent(
                llm, [get_weather], prompt=prompt, checkpointer=InMemorySaver(), name="weather_agent"
            )
            config = {"configurable": {"thread_id": "thread-1"}}
            answers = [
                agent.invoke({"messages": [("user", message)]}, config)["messages"][-1].content
                for message in MESSAGES
            ]
            assert answers == ANSWERS
            assert (fake.errors, fake.pending) == ([], 0)
            requests = [request.body for request in fake.requests]
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans()), requests


def check_calls(client, key, script) -> dict:
    """The one run (the thread): its calls, usage as the fake returned it, tools, turns; the run back."""
    [run] = read(client, key).values()
    assert (run["listed"]["key"], run["listed"]["key_source"]) == ("thread-1", "session.id")
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert len(calls) == 3 and run["listed"]["turns"] == 2
    assert [call["turn"] for call in calls] == [1, 1, 2]
    # One agent for the whole thread. Not asserted: its name. ctxview names it ``agent`` (the graph's model
    # node, the AGENT span nearest each call) rather than ``weather_agent`` (the graph's name, the root
    # AGENT span), and makes one invocation per step of that node (3, where the user invoked the agent
    # twice).
    assert len({call["agent"] for call in calls}) == 1 and len(run["detail"]["agents"]) == 1
    for call, (prompt, cached, completion, tool_call, _text) in zip(calls, script, strict=True):
        assert call["usage"] == {
            "uncached": prompt - cached,
            "cache_write": 0,  # OpenAI reports no cache writes
            "cache_read": cached,
            "output": completion,
            "reasoning": None,  # the fake sent no completion details, and the span carries none
            "prompt_total": prompt,
        }, call["seq"]
        assert call["tool_definitions"] == ["get_weather"]
        assert call["tool_calls"] == ([{"name": "get_weather", "id": "call_1"}] if tool_call else [])
        assert call["finish_reasons"] == (["tool_call"] if tool_call else ["stop"])
        assert call["content_captured"] is True
    return run


def test_a_react_agent_thread_is_one_run_two_turns_exact_usage_and_no_finding(
    monkeypatch, send_as, client, key
):
    spans, requests = record(monkeypatch, STEADY, steady_prompt)
    assert {span.instrumentation_scope.name for span in spans} == {"openinference.instrumentation.langchain"}
    assert len(requests) == 3 and len({span.context.trace_id for span in spans}) == 2
    send_as(key, encode_spans(spans))
    run = check_calls(client, key, STEADY)
    assert run["findings"] == []


def test_a_system_prompt_that_names_the_turn_is_the_one_break(monkeypatch, send_as, client, key):
    spans, requests = record(monkeypatch, VOLATILE, volatile_prompt)
    systems = [request["messages"][0]["content"] for request in requests]
    assert systems[0] == systems[1] != systems[2]
    send_as(key, encode_spans(spans))
    run = check_calls(client, key, VOLATILE)
    found = [
        (finding["type"], finding["call_seq"], finding["cause"], finding["evidence"]["reference_seq"])
        for finding in run["findings"]
    ]
    assert found == [("cache_invalidated", 3, "volatile_system_prompt", 2)]
    changed = run["findings"][0]["evidence"]["detail"]["bytes"]
    assert (changed["old"], changed["new"]) == ("1", "2")
