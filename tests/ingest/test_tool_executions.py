"""One tool execution however many spans tell of it (ingest.tool_executions, pure: no database), and the
MCP family that marks an MCP ``tools/call`` span as a tool execution."""

from itertools import permutations

from ingest import families
from ingest.families import TOOL
from ingest.normalise import operation_record
from ingest.tool_executions import ToolSpan, executions

MCP_DETAILS = {"mcp.method.name": "tools/call", "mcp.session.id": "s-1", "server.address": "mcp.example"}

# A framework's tool span (f), the MCP client's (c), a transport span that is no tool (h), the MCP
# server's (s): one call of get_weather. Then a second call of it (f2), and another tool (g) under f2.
FRAMEWORK = ToolSpan(
    "f", "agent", "get_weather", 10, 90, call_id="call_1", arguments_bytes=16, result_bytes=15
)
CLIENT = ToolSpan("c", "f", "get_weather", 11, 80, details={"mcp.method.name": "tools/call"})
SERVER = ToolSpan("s", "h", "get_weather", 20, 70, result_bytes=99, details=MCP_DETAILS)
SECOND = ToolSpan("f2", "agent", "get_weather", 100, 190, call_id="call_2")
OTHER = ToolSpan("g", "f2", "geocode", 110, 120)
LINKS = {"f": "agent", "c": "f", "h": "c", "s": "h", "f2": "agent", "g": "f2", "agent": ""}


def test_tool_spans_nested_in_a_span_of_the_same_tool_are_one_execution():
    [first, second, other] = executions([SERVER, CLIENT, FRAMEWORK, SECOND, OTHER], LINKS, {"agent"})
    # The outermost span is the execution; the spans between (h) do not matter.
    assert (first.span_id, first.name, first.spans) == ("f", "get_weather", ("f", "c", "s"))
    assert (first.start_ns, first.end_ns, first.call_id) == (10, 90, "call_1")
    # Each figure from the outermost span that carries it; details from the inner spans, the outer first.
    assert (first.arguments_bytes, first.result_bytes) == (16, 15)
    assert first.details == {
        "mcp.method.name": "tools/call",
        "mcp.session.id": "s-1",
        "server.address": "mcp.example",
    }
    # A second call of the same tool beside the first is an execution of its own, and so is another tool
    # inside it.
    assert (second.span_id, second.spans, second.call_id) == ("f2", ("f2",), "call_2")
    assert (other.span_id, other.name) == ("g", "geocode")


def test_a_figure_only_an_inner_span_carries_completes_the_execution():
    outer = ToolSpan("f", "", "get_weather", 10, 90)
    inner = ToolSpan("s", "f", "get_weather", 20, 70, call_id="call_9", arguments_bytes=5, result_bytes=7)
    [execution] = executions([inner, outer])
    assert (execution.span_id, execution.call_id, execution.arguments_bytes, execution.result_bytes) == (
        "f",
        "call_9",
        5,
        7,
    )


def test_an_agent_or_a_model_call_between_two_spans_of_one_tool_makes_two_executions():
    # An agent offered as a tool that runs an agent which calls a tool of the same name: two executions.
    spans = [ToolSpan("t1", "", "research", 0, 100), ToolSpan("t2", "a", "research", 10, 50)]
    links = {"a": "t1", "t2": "a"}
    assert [e.span_id for e in executions(spans, links, {"a"})] == ["t1", "t2"]
    assert [e.span_id for e in executions(spans, {"a": "t1", "t2": "call"}, {"call"})] == ["t1", "t2"]
    # With neither between, the inner one is part of the outer (the name compared without case or spaces).
    spans[1] = ToolSpan("t2", "a", " Research ", 10, 50)
    assert [e.spans for e in executions(spans, links)] == [("t1", "t2")]


def test_the_executions_are_the_same_whatever_part_of_the_trace_came_first():
    spans = [SERVER, CLIENT, FRAMEWORK, SECOND, OTHER]
    everything = executions(spans, LINKS, {"agent"})
    for order in permutations(spans):
        assert executions(order, LINKS, {"agent"}) == everything
    # Before the spans between the server's and the client's are stored, the server's span stands alone;
    # once they are, it is part of the execution.
    early = executions([SERVER], {"s": "h"}, {"agent"})
    assert [(e.span_id, e.call_id) for e in early] == [("s", "")]
    partial = executions([SERVER, CLIENT], {"s": "h", "c": "f"}, {"agent"})
    assert [e.spans for e in partial] == [("c",), ("s",)]
    joined = executions([SERVER, CLIENT], {"s": "h", "h": "c", "c": "f"}, {"agent"})
    assert [e.spans for e in joined] == [("c", "s")]


def test_a_cycle_in_the_parent_ids_ends_the_walk():
    spans = [ToolSpan("a", "b", "x", 0, 1), ToolSpan("b", "a", "x", 0, 1)]
    found = executions(spans, {"a": "b", "b": "a"})
    assert sorted(span for execution in found for span in execution.spans) == ["a", "b"]


def test_an_mcp_tools_call_span_is_a_tool_execution_named_by_its_target():
    attributes = {"mcp.method.name": "tools/call", "jsonrpc.request.id": "3"}
    assert families.classify("MCP send tools/call get_weather", attributes) == TOOL
    assert families.classify("tools/list", {"mcp.method.name": "tools/list"}) is None
    span = {
        "trace_id": "t" * 32,
        "span_id": "s" * 16,
        "parent_span_id": "p" * 16,
        "name": "MCP send tools/call get_weather",
        "attributes": attributes,
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
    }
    record = operation_record(span, TOOL)
    assert (record["name"], record["details"]) == ("get_weather", {"mcp.method.name": "tools/call"})
    # gen_ai.tool.name wins where it is given; the MCP span's session, protocol and server are its details.
    attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "mcp.session.id": "8f1c",
        "mcp.protocol.version": "2025-11-25",
        "server.address": "mcp.example",
        "server.port": 443,
    }
    record = operation_record({**span, "name": "tools/call get_weather", "attributes": attributes}, TOOL)
    assert record["name"] == "get_weather"
    assert record["details"] == {
        "mcp.method.name": "tools/call",
        "mcp.session.id": "8f1c",
        "mcp.protocol.version": "2025-11-25",
        "server.address": "mcp.example",
        "server.port": 443,
    }
    # A framework's tool span (no MCP keys) adds no details, even with a server address.
    plain = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "server.address": "h"}
    assert operation_record({**span, "attributes": plain}, TOOL)["details"] == {}
