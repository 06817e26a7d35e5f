"""LangGraph under OpenInference (issue 33), recorded in the test from the real langgraph 1.2.24,
langchain-openai 1.8.1 and openinference-instrumentation-langchain 0.1.80 against the local fake OpenAI API.

A prebuilt ReAct agent (``create_react_agent``, named ``weather_agent``) with one tool and a checkpointer:
the first user message takes a tool call and an answer, the second (same ``thread_id``) one answer. Each
``invoke`` is a trace of its own; the instrumentation copies the ``thread_id`` to every span as
``session.id``. It marks as AGENT every span whose name holds "agent": the graph's root span
(``weather_agent``) and, once per step, the graph's model node (``agent``), under which the ``ChatOpenAI``
LLM span sits (``llm.tools.<i>`` in the provider's shape, ``llm.token_count.prompt_details.cache_read``, no
completion details). Only a node's spans carry LangGraph's step in ``metadata`` (``langgraph_step``,
``langgraph_node``, ``langgraph_checkpoint_ns``): the model node is one step of the graph, and its calls are
the graph's, so the agent is ``weather_agent``, invoked once per ``invoke`` (ctxview read the node ``agent``
as the agent, invoked once per step). A graph run as a node of another graph (a subgraph) is an agent of its
own.

With a steady system prompt there is no finding; with one that names the user turn (first), the second
turn's request is the one break (``volatile_system_prompt``), against the request before it."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
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


@contextmanager
def instrumented(monkeypatch) -> Iterator[InMemorySpanExporter]:
    """The real LangChain instrumentation, exporting to memory."""
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()


def record(monkeypatch, script, prompt) -> tuple[list, list]:
    """The conversation through the real graph and instrumentation: its spans and the requests made."""
    with instrumented(monkeypatch) as exporter, FakeProvider() as fake:
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
    return list(exporter.get_finished_spans()), requests


def invoked(invocation: dict) -> tuple:
    return tuple(invocation[field] for field in ("agent", "parent", "entered", "depth", "seqs"))


def check_calls(client, key, script) -> dict:
    """The one run (the thread): its calls, usage as the fake returned it, tools, turns; the run back."""
    [run] = read(client, key).values()
    assert (run["listed"]["key"], run["listed"]["key_source"]) == ("thread-1", "session.id")
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert len(calls) == 3 and run["listed"]["turns"] == 2
    assert [call["turn"] for call in calls] == [1, 1, 2]
    # One agent for the whole thread, the graph (its root AGENT span), invoked once per ``invoke``: the AGENT
    # span of its model node at each step is one step of it, not an agent of its own.
    assert [call["agent"] for call in calls] == ["weather_agent"] * 3
    assert run["listed"]["agent"] == "weather_agent"
    assert [agent["name"] for agent in run["detail"]["agents"]] == ["weather_agent"]
    assert [invoked(entry) for entry in run["detail"]["invocations"]] == [
        ("weather_agent", None, "root", 0, [1, 2]),
        ("weather_agent", None, "root", 0, [3]),
    ]
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


@pytest.mark.parametrize("order", ["ended", "started"])
def test_the_arrival_order_of_the_spans_changes_nothing(monkeypatch, send_as, client, key, order):
    """One span a request: as they ended (each call before its node's and its graph's spans, read again as
    they arrive) or as they started (the graph's first)."""
    spans, _ = record(monkeypatch, STEADY, steady_prompt)
    for span in sorted(spans, key=lambda span: span.start_time) if order == "started" else spans:
        send_as(key, encode_spans([span]))
    run = check_calls(client, key, STEADY)
    assert run["findings"] == []


def test_a_react_agent_run_as_a_node_of_another_graph_is_an_agent_of_its_own(
    monkeypatch, send_as, client, key
):
    """``team_agent`` runs ``research_agent`` (a tool call, then an answer), then ``writer_agent``: prebuilt
    ReAct agents as its nodes. Each such node is two AGENT spans (the node's and its subgraph's, the same step
    of ``team_agent``) above the subgraph's own steps: the node runs a graph of its own, so it is an agent,
    and its model node's steps are its work. ``team_agent`` has no calls of its own: the workflow around
    them, handing the work from one to the next."""
    with instrumented(monkeypatch) as exporter, FakeProvider() as fake:
        replies = [(("call_1", "get_weather", {"city": "Paris"}), None), (None, "18C."), (None, "Rain, 18C.")]
        for number, (call, text) in enumerate(replies, start=1):
            calls = [call] if call else None
            usage = openai_usage(200, 10)
            fake.enqueue(
                openai_reply(
                    id=f"chatcmpl-team-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls
                )
            )
        llm = ChatOpenAI(model=MODEL, base_url=fake.openai_base_url, api_key="sk-fake", max_retries=0)
        team = StateGraph(MessagesState)
        team.add_node("research_agent", create_react_agent(llm, [get_weather], name="research_agent"))
        team.add_node("writer_agent", create_react_agent(llm, [], name="writer_agent"))
        team.add_edge(START, "research_agent")
        team.add_edge("research_agent", "writer_agent")
        team.add_edge("writer_agent", END)
        config = {"configurable": {"thread_id": "team-1"}}
        team.compile(name="team_agent").invoke({"messages": [("user", MESSAGES[0])]}, config)
        assert (fake.errors, fake.pending) == ([], 0)
    spans = exporter.get_finished_spans()
    kinds = {span.name: span.attributes["openinference.span.kind"] for span in spans}
    assert {name: kinds[name] for name in ("team_agent", "research_agent", "writer_agent", "agent")} == {
        name: "AGENT" for name in ("team_agent", "research_agent", "writer_agent", "agent")
    }
    send_as(key, encode_spans(spans))
    [run] = read(client, key).values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert [call["agent"] for call in calls] == ["research_agent", "research_agent", "writer_agent"]
    research, writer = run["detail"]["invocations"]
    assert invoked(research) == ("research_agent", None, "root", 0, [1, 2])
    assert invoked(writer) == ("writer_agent", research["id"], "handoff", 0, [3])
    assert (run["listed"]["agent"], run["listed"]["turns"], run["findings"]) == ("research_agent", 1, [])
