"""smolagents with a managed agent, through OpenInference (issue 33, items 1 and 8), recorded in the test
from the real smolagents and openinference-instrumentation-smolagents against the local fake OpenAI API.

The manager hands the task to its managed ``researcher`` (a tool call), which looks the weather up and
answers; the manager then answers the user. smolagents marks its agents only by the AGENT spans' names
(``manager.run``, ``researcher.run``), with each agent's model calls below its own. ctxview read the
researcher's first call as a ``tools_changed`` break against the manager's (another agent, other tools),
attributed no agent, and counted more than the one user turn. The manager's requests offer ``researcher``
as a tool, but the instrumentation names it only on the manager's AGENT span
(``smolagents.managed_agents.0.name``), not in its LLM spans' ``llm.tools``: ctxview read the call to it
as a call of an unknown tool."""

import pytest
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from smolagents import OpenAIServerModel, ToolCallingAgent, tool

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage

MODEL = "gpt-4.1"
# (agent, prompt, cached, tool call): the manager asks the researcher, the researcher calls the weather
# tool then answers, the manager answers. Each agent's second call reads its own first call's prefix.
SCRIPT = [
    ("manager", 900, 0, ("researcher", {"task": "Find the weather in Paris", "additional_args": None})),
    ("researcher", 700, 0, ("get_weather", {"city": "Paris"})),
    ("researcher", 760, 640, ("final_answer", {"answer": "18C, light rain"})),
    ("manager", 1000, 768, ("final_answer", {"answer": "It is 18C with light rain in Paris."})),
]


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: the city
    """
    return "18C, light rain"


def record() -> tuple[list, list[list[str]]]:
    """The finished spans, and the tool names each request to the fake offered, in order."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        with FakeProvider() as fake:
            for number, (_agent, prompt, cached, (name, arguments)) in enumerate(SCRIPT, start=1):
                usage = openai_usage(prompt, 20, cached_tokens=cached)
                call = [(f"call_{number}", name, arguments)]
                fake.enqueue(openai_reply(id=f"chatcmpl-{number}", model=MODEL, usage=usage, tool_calls=call))
            model = OpenAIServerModel(model_id=MODEL, api_base=fake.openai_base_url, api_key="test")
            researcher = ToolCallingAgent(
                tools=[get_weather], model=model, name="researcher", description="Finds facts.", max_steps=3
            )
            manager = ToolCallingAgent(tools=[], model=model, managed_agents=[researcher], name="manager")
            assert manager.run("What's the weather in Paris?") == "It is 18C with light rain in Paris."
            assert (fake.errors, fake.pending) == ([], 0)
            offered = [
                [tool["function"]["name"] for tool in request.body["tools"]] for request in fake.requests
            ]
    finally:
        instrumentor.uninstrument()
    return list(exporter.get_finished_spans()), offered


@pytest.fixture
def recorded():
    return record()


def test_a_managed_agent_is_an_agent_of_its_own_one_turn_and_no_break(recorded, send_as, client, key):
    spans, offered = recorded
    assert {span.instrumentation_scope.name for span in spans} == {"openinference.instrumentation.smolagents"}
    # What the requests really offered: each agent's tools, the manager's managed agent among its own.
    assert offered == [
        ["final_answer", "researcher"],
        ["get_weather", "final_answer"],
        ["get_weather", "final_answer"],
        ["final_answer", "researcher"],
    ]
    [manager] = [span for span in spans if span.name == "manager.run"]
    assert manager.attributes["smolagents.managed_agents.0.name"] == "researcher"
    send_as(key, encode_spans(spans))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"]
    # smolagents names its agents only in the AGENT spans' names.
    assert [call["agent"] for call in calls] == [f"{agent}.run" for agent, *_ in SCRIPT]
    assert [call["turn"] for call in calls] == [1, 1, 1, 1]
    # openinference-instrumentation-smolagents 0.1.43 passes on the prompt, completion and total figures
    # only, not the cached part the provider reported: unknown, not 0.
    assert [call["usage"]["prompt_total"] for call in calls] == [prompt for _, prompt, _, _ in SCRIPT]
    assert [call["usage"]["cache_read"] for call in calls] == [None] * 4
    # The manager's llm.tools leave its managed agent out; its AGENT span names it: the calls offer the
    # tools the requests offered, the managed agent marked as the agent span's.
    details = [client.get(f"/api/v1/calls/{call['id']}", **headers).json() for call in calls]
    assert [detail["tool_definitions"] for detail in details] == offered
    assert [detail["agent_tools"] for detail in details] == [["researcher"], [], [], ["researcher"]]
    findings = client.get(f"/api/v1/runs/{run['id']}/findings", **headers).json()["findings"]
    assert [finding for finding in findings if finding["type"] == "unknown_tool_called"] == []
    breaks = [
        finding for finding in findings if finding["type"] in ("cache_invalidated", "invisible_invalidator")
    ]
    assert breaks == []


def test_the_managed_agent_is_offered_when_the_managers_span_comes_last(recorded, send_as, client, key):
    # The AGENT span ends after its calls, so an exporter may send it in a later batch: the manager's
    # calls are read again then, and its call to the researcher is no longer of an unknown tool.
    spans, offered = recorded
    send_as(key, encode_spans([span for span in spans if span.name != "manager.run"]))
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    findings = client.get(f"/api/v1/runs/{run['id']}/findings", **headers).json()["findings"]
    assert [finding["type"] for finding in findings].count("unknown_tool_called") == 1
    send_as(key, encode_spans([span for span in spans if span.name == "manager.run"]))
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"]
    details = [client.get(f"/api/v1/calls/{call['id']}", **headers).json() for call in calls]
    assert [detail["tool_definitions"] for detail in details] == offered
    findings = client.get(f"/api/v1/runs/{run['id']}/findings", **headers).json()["findings"]
    assert [finding for finding in findings if finding["type"] == "unknown_tool_called"] == []
