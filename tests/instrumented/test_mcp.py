"""A tool called over MCP (issue 33), recorded in the test from the real pydantic-ai, its MCP toolset (the
fastmcp client) and an MCP server built with the real ``mcp`` SDK, against the local fake OpenAI API.

The agent's model asks for ``get_weather`` once, then answers. The server is the SDK's ``MCPServer`` with
one tool, connected in-process. Every library traces through the global tracer provider, so the
recording runs in a process of its own (``python -m tests.instrumented.test_mcp``), all spans in one
in-memory exporter. One call of the tool is four spans, each inside the one before:

    execute_tool get_weather          pydantic-ai   INTERNAL  gen_ai.operation.name=execute_tool, tool call id
    └ tools/call get_weather          fastmcp       CLIENT    execute_tool, mcp.method.name=tools/call
      └ MCP send tools/call get_weather  mcp-python-sdk CLIENT  mcp.method.name, jsonrpc.request.id only
        └ tools/call get_weather      mcp-python-sdk SERVER   execute_tool, mcp.protocol.version

(the server's span continues the trace from the W3C context the client put in the request's ``_meta``).
ctxview stored three tool executions for the one call (the SDK's client span names no operation), two of
them without the tool call id; the calls' tool definitions, usage and findings were right. Now the four
are one execution, whichever arrives first (``ingest.tool_executions``). Listing the tools
(``tools/list``) and discovering the server are spans of their own, no executions. None of the spans
names the server a tool came from: the in-memory transport has no ``mcp.session.id`` (fastmcp sets it
only over streamable HTTP, which has sessions), and no span carries the server's name or address.
"""

import base64
import json
import subprocess
import sys

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.instrumented.run import SAFETY_ENV
from tests.instrumented.scenarios import RESULT_MARKER, ROOT, child_environment

MODEL = "gpt-4.1"
INSTRUCTIONS = "You answer weather questions with the tools you have."
QUESTION = "What's the weather in Paris?"
ANSWER = "It is 18C with light rain in Paris."
WEATHER = "18C, light rain"
# (prompt, cached, output) per call: the second reads the first one's prefix from the cache.
USAGE = [(1800, 0, 20), (1880, 1792, 12)]


def record() -> dict:
    """Run the agent (in this process, which it takes over: global tracer provider, instrument_all)."""
    from mcp.server.mcpserver import MCPServer
    from openai import AsyncOpenAI
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai import Agent
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the mcp SDK and fastmcp trace through the global provider
    Agent.instrument_all()

    server = MCPServer("weather")

    @server.tool()
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return WEATHER

    with FakeProvider() as fake:
        (prompt, cached, output), (prompt_2, cached_2, output_2) = USAGE
        fake.enqueue(
            openai_reply(
                id="chatcmpl-1",
                model=MODEL,
                usage=openai_usage(prompt, output, cached_tokens=cached),
                tool_calls=[("call_1", "get_weather", {"city": "Paris"})],
            ),
            openai_reply(
                id="chatcmpl-2",
                model=MODEL,
                usage=openai_usage(prompt_2, output_2, cached_tokens=cached_2),
                text=ANSWER,
            ),
        )
        client = AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
        model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, instructions=INSTRUCTIONS, name="weather_agent", toolsets=[MCPToolset(server)])
        output_text = agent.run_sync(QUESTION).output
        offered = [
            [tool["function"]["name"] for tool in request.body.get("tools", [])] for request in fake.requests
        ]
        errors, pending = fake.errors, fake.pending
    provider.force_flush()
    spans = sorted(exporter.get_finished_spans(), key=lambda span: (span.start_time, span.context.span_id))
    return {
        "output": output_text,
        "errors": errors,
        "pending": pending,
        "offered": offered,
        "spans": [
            {
                "name": span.name,
                "scope": span.instrumentation_scope.name,
                "span_id": f"{span.context.span_id:016x}",
                "parent_span_id": f"{span.parent.span_id:016x}" if span.parent else "",
                "attributes": {key: str(value) for key, value in span.attributes.items()},
                # Each span as an OTLP request of its own: a test sends them in any grouping and order.
                "request": base64.b64encode(encode_spans([span]).SerializeToString()).decode(),
            }
            for span in spans
        ],
    }


def recorded() -> dict:
    command = [sys.executable, "-m", "tests.instrumented.test_mcp"]
    # Proxies pointed at a closed port: nothing but the local fake is reached.
    environment = {**child_environment(), **SAFETY_ENV}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180, env=environment)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-8000:]
    return json.loads(lines[-1][len(RESULT_MARKER) :])


def request_of(spans: list[dict]) -> ExportTraceServiceRequest:
    """One OTLP request holding these spans."""
    request = ExportTraceServiceRequest()
    for span in spans:
        request.MergeFrom(ExportTraceServiceRequest.FromString(base64.b64decode(span["request"])))
    return request


@pytest.fixture(scope="module")
def recording() -> dict:
    return recorded()


def api(client, key: str, path: str) -> dict:
    return client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}").json()


def the_run(client, key: str) -> dict:
    [run] = api(client, key, "/api/v1/runs")["runs"]
    return api(client, key, f"/api/v1/runs/{run['id']}")


def tool_spans(recording: dict) -> list[dict]:
    """The spans that tell of the one tool call, outermost first (each the parent of the next)."""
    chain = [span for span in recording["spans"] if span["name"].endswith("get_weather")]
    assert [span["parent_span_id"] for span in chain[1:]] == [span["span_id"] for span in chain[:-1]]
    return chain


def test_a_tool_called_over_mcp_is_one_execution(recording, send_as, client, key, alice):
    assert (recording["output"], recording["errors"], recording["pending"]) == (ANSWER, [], 0)
    assert {span["scope"] for span in recording["spans"]} == {"pydantic-ai", "fastmcp", "mcp-python-sdk"}
    chain = tool_spans(recording)
    assert [(span["scope"], span["name"]) for span in chain] == [
        ("pydantic-ai", "execute_tool get_weather"),
        ("fastmcp", "tools/call get_weather"),
        ("mcp-python-sdk", "MCP send tools/call get_weather"),
        ("mcp-python-sdk", "tools/call get_weather"),
    ]
    # The SDK's client span names no operation; the three others say execute_tool.
    assert [span["attributes"].get("gen_ai.operation.name") for span in chain] == [
        "execute_tool",
        "execute_tool",
        None,
        "execute_tool",
    ]
    server_span = chain[-1]
    send_as(key, request_of(recording["spans"]))
    run = the_run(client, key)
    calls = api(client, key, f"/api/v1/runs/{run['id']}/calls")["calls"]
    assert [call["usage"] for call in calls] == [
        {
            "uncached": prompt - cached,
            "cache_write": 0,  # OpenAI bills no cache writes (ingest/families/providers.py)
            "cache_read": cached,
            "output": output,
            "reasoning": None,
            "prompt_total": prompt,
        }
        for prompt, cached, output in USAGE
    ]
    details = [api(client, key, f"/api/v1/calls/{call['id']}") for call in calls]
    # The tools the requests offered: the MCP server's, listed through the toolset.
    assert recording["offered"] == [["get_weather"], ["get_weather"]]
    assert [detail["tool_definitions"] for detail in details] == recording["offered"]
    assert [detail["tool_calls"] for detail in details] == [[{"name": "get_weather", "id": "call_1"}], []]
    # One execution (was three: pydantic-ai's, fastmcp's client span and the SDK's server span), the
    # framework's span, with what the MCP spans inside it add.
    assert run["tool_executions"] == [
        {
            "name": "get_weather",
            "call_id": "call_1",
            "call_seq": 1,
            "trace_id": calls[0]["trace_id"],
            "span_id": chain[0]["span_id"],
            "started_at": run["tool_executions"][0]["started_at"],
            "duration_ms": run["tool_executions"][0]["duration_ms"],
            "arguments_bytes": len('{"city":"Paris"}'),
            "result_bytes": len(WEATHER),
            "details": {
                "mcp.method.name": "tools/call",
                "mcp.protocol.version": server_span["attributes"]["mcp.protocol.version"],
            },
            "spans": [span["span_id"] for span in chain],
        }
    ]
    findings = api(client, key, f"/api/v1/runs/{run['id']}/findings")["findings"]
    assert [finding["type"] for finding in findings] == []
    # The call's page shows the execution once, told by four spans, with the MCP method.
    client.force_login(alice)
    page = client.get(f"/calls/{calls[0]['id']}/").content.decode()
    section = page.split("<h2>Tool executions", 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") == 2  # the header and one execution
    assert "told by 4 spans" in section and "mcp.method.name=tools/call" in section
    second = client.get(f"/calls/{calls[1]['id']}/").content.decode()
    assert "<h2>Tool executions" not in second  # it asked for no tool


def test_the_execution_is_one_whichever_span_arrives_first(recording, send_as, client, key):
    # The framework's span ends last, so an exporter may send it last; the MCP server's may come first.
    chain = tool_spans(recording)
    first = [span for span in recording["spans"] if span["span_id"] not in {s["span_id"] for s in chain[:-1]}]
    send_as(key, request_of(first))  # the calls, the agent, and the server's span alone
    [alone] = the_run(client, key)["tool_executions"]
    assert (alone["span_id"], alone["call_id"], alone["call_seq"]) == (chain[-1]["span_id"], None, None)
    send_as(key, request_of(chain[1:3]))  # the MCP client spans: the server's span is inside them
    [client_side] = the_run(client, key)["tool_executions"]
    assert client_side["spans"] == [span["span_id"] for span in chain[1:]]
    send_as(key, request_of(chain[:1]))  # the framework's span, with the tool call id
    run = the_run(client, key)
    [execution] = run["tool_executions"]
    assert (execution["span_id"], execution["call_id"], execution["call_seq"]) == (
        chain[0]["span_id"],
        "call_1",
        1,
    )
    assert execution["spans"] == [span["span_id"] for span in chain]
    assert execution["details"]["mcp.method.name"] == "tools/call"
    findings = api(client, key, f"/api/v1/runs/{run['id']}/findings")["findings"]
    assert [finding["type"] for finding in findings] == []


if __name__ == "__main__":
    print(RESULT_MARKER + json.dumps(record()))
