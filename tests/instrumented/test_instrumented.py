"""Real GenAI instrumentations, real provider SDKs, a local fake provider, the real OTLP/HTTP exporters.

Each scenario runs in a subprocess (see ``scenarios.py`` and ``run.py``) that exports to the live test
server; the tests check what arrived in the Span and LogRecord tables: one model-call span per call
with the raw usage attributes the instrumentation is known to emit, and for the event mode the log
records joined to their spans. A second set of tests checks the captured fixtures in tests/data/otlp.

The instrumentation packages are dev dependencies (pins in tests/instrumented/README.md). Where one is
not installed, its scenarios are skipped with the reason shown in the summary (-ra), or fail when
CTXVIEW_REQUIRE_INSTRUMENTED=1 (set it in CI once the pins are in pyproject.toml).
"""

import itertools
import json
import os

import pytest

from ingest import otlp
from ingest.models import LogRecord, Span
from tests.instrumented.expected_agents import EXPECTED, invocation_of
from tests.instrumented.scenarios import (
    FIXTURES,
    LIVE_SCENARIOS,
    SCENARIOS,
    canonical_usage,
    is_model_call,
    missing_packages,
    raw_usage_attributes,
    run_scenario,
    run_scenario_kept,
)

EVENT_NAME = "gen_ai.client.inference.operation.details"


def require_packages(name: str) -> None:
    missing = missing_packages(name)
    if not missing:
        return
    message = f"scenario {name} needs {', '.join(missing)} (see tests/instrumented/README.md for the pins)"
    if os.environ.get("CTXVIEW_REQUIRE_INSTRUMENTED") == "1":
        pytest.fail(message)
    pytest.skip(message)


def check_usage(scenario, call: dict, attributes: dict, scope: str | None = None) -> None:
    expected, absent = raw_usage_attributes(scenario, call, scope)
    assert {name: attributes.get(name) for name in expected} == expected, f"call {call['index']}"
    assert [name for name in absent if name in attributes] == [], f"call {call['index']}"


@pytest.mark.parametrize("name", LIVE_SCENARIOS)
def test_the_scenario_delivers_one_model_call_span_per_call(live_server, project, key, scenario_folder, name):
    require_packages(name)
    scenario = SCENARIOS[name]
    result = run_scenario_kept(name, live_server.url, key, scenario_folder)

    assert result["problems"] == []
    assert result["exported"]["spans"] == len(result["spans"])
    stored = {row.span_id: row for row in Span.objects.filter(project=project)}
    assert set(stored) == {span["span_id"] for span in result["spans"]}
    model_calls = [row for row in stored.values() if is_model_call(row.attributes)]
    assert len(model_calls) == len(scenario.calls) * len(scenario.scopes)

    for call in result["calls"]:
        row = stored[call["span"]["span_id"]]
        assert row.trace_id == call["span"]["trace_id"]
        assert row.scope_name == scenario.scope
        assert row.resource.service_name == f"instrumented-{name}"
        check_usage(scenario, call, row.attributes)
        for other in call["other_spans"]:
            check_usage(scenario, call, stored[other["span_id"]].attributes, other["scope"])

    # The conversation's turns: the calls of a turn share a trace, the next turn has another one.
    assert [turn["calls"] for turn in result["turns"]] == [
        [index for index, call in enumerate(scenario.calls) if call.turn == number]
        for number in range(1, len(scenario.user_turns) + 1)
    ]
    assert all(len(turn["trace_ids"]) == 1 for turn in result["turns"])
    assert len({turn["trace_ids"][0] for turn in result["turns"]}) == len(scenario.user_turns)

    if not scenario.logs:
        assert LogRecord.objects.filter(project=project).count() == 0


@pytest.mark.parametrize("name", [name for name, scenario in SCENARIOS.items() if scenario.logs])
def test_content_events_arrive_as_log_records_joined_to_their_spans(live_server, project, key, name):
    require_packages(name)
    scenario = SCENARIOS[name]
    result = run_scenario(name, live_server.url, key)
    assert result["problems"] == []

    records = list(LogRecord.objects.filter(project=project))
    assert len(records) == len(result["calls"]) == result["exported"]["logs"]
    by_span = {record.span_id: record for record in records}
    for call in result["calls"]:
        record = by_span[call["span"]["span_id"]]
        assert record.trace_id == call["span"]["trace_id"]
        assert record.event_name == EVENT_NAME
        # The event repeats the span's attributes, usage included, and adds the content in EVENT_ONLY
        # mode (google-genai sends it in SPAN_ONLY mode too, without the content).
        check_usage(scenario, call, record.attributes)
        assert record.attributes["gen_ai.response.id"] == call["response_id"]
        if scenario.env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") == "EVENT_ONLY":
            span = Span.objects.get(project=project, span_id=call["span"]["span_id"])
            assert record.attributes["gen_ai.input.messages"][0]["role"] == "system"
            assert record.attributes["gen_ai.output.messages"][0]["role"] == "assistant"
            assert "gen_ai.input.messages" not in span.attributes  # content only in the event
        else:  # the content is on the span (see the fixture), never in the event
            assert "gen_ai.input.messages" not in record.attributes
            assert "gen_ai.output.messages" not in record.attributes


def test_pydantic_ai_agent_spans_carry_the_aggregated_usage_of_their_turn(live_server, project, key):
    require_packages("pydantic-ai-anthropic")
    result = run_scenario("pydantic-ai-anthropic", live_server.url, key)
    assert result["problems"] == []
    spans = Span.objects.filter(project=project)
    agents = [span for span in spans if span.attributes.get("gen_ai.operation.name") == "invoke_agent"]
    assert len(agents) == 2
    conversation_ids = set()
    for agent in agents:
        calls = [call for call in result["calls"] if call["span"]["trace_id"] == agent.trace_id]
        totals = [canonical_usage("anthropic", call["usage"]) for call in calls]
        assert agent.attributes["gen_ai.aggregated_usage.input_tokens"] == sum(
            t["input_total"] for t in totals
        )
        assert agent.attributes["gen_ai.aggregated_usage.output_tokens"] == sum(t["output"] for t in totals)
        assert "gen_ai.usage.input_tokens" not in agent.attributes
        conversation_ids.add(agent.attributes["gen_ai.conversation.id"])
    assert len(conversation_ids) == 1  # message_history carries the conversation id to turn 2


# --- The captured fixtures ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_captured_fixture_is_valid_otlp_json_with_the_described_usage(name):
    """tests/data/otlp/<name>.json parses as OTLP/JSON and matches its description (needs no packages)."""
    document = json.loads((FIXTURES / f"{name}.json").read_text())
    scenario = SCENARIOS[name]
    description = document["description"]
    assert description["problems"] == []

    traces = otlp.parse_request(otlp.TRACES, json.dumps(document["traces"]).encode(), otlp.JSON)
    assert otlp.validate(otlp.TRACES, traces).rejected == 0
    rows = {row["span_id"]: row for _, row in otlp.spans(traces)}
    assert len(rows) == len(description["spans"])
    requests = [row for row in rows.values() if row["name"] not in scenario.preparing_spans]
    assert sum(is_model_call(row["attributes"]) for row in requests) == len(scenario.calls) * len(
        scenario.scopes
    )
    for call in description["calls"]:
        row = rows[call["span"]["span_id"]]
        assert row["scope_name"] == scenario.scope
        check_usage(scenario, call, row["attributes"])
        for other in call["other_spans"]:
            check_usage(scenario, call, rows[other["span_id"]]["attributes"], other["scope"])

    if scenario.logs:
        logs = otlp.parse_request(otlp.LOGS, json.dumps(document["logs"]).encode(), otlp.JSON)
        records = [row for _, row in otlp.log_records(logs)]
        assert {record["span_id"] for record in records} == {
            call["span"]["span_id"] for call in description["calls"]
        }
    else:
        assert document["logs"] is None


# --- Issue 14: the agents in the recordings and the expected outcome ---------------------------

AGENT_SCENARIOS = [name for name, outcome in EXPECTED.items() if outcome.sessions[0].invocations]


def fixture_spans(name: str) -> tuple[dict, dict[str, dict]]:
    document = json.loads((FIXTURES / f"{name}.json").read_text())
    traces = otlp.parse_request(otlp.TRACES, json.dumps(document["traces"]).encode(), otlp.JSON)
    return document["description"], {row["span_id"]: row for _, row in otlp.spans(traces)}


def agent_of(row: dict) -> str | None:
    """The agent a span stands for: OpenInference AGENT spans, or GenAI invoke_agent spans."""
    attributes = row["attributes"]
    if attributes.get("openinference.span.kind") == "AGENT" and "agent.name" in attributes:
        return attributes["agent.name"]
    if attributes.get("gen_ai.operation.name") == "invoke_agent":
        return attributes["gen_ai.agent.name"]
    return None


def agent_ancestors(rows: dict[str, dict], span_id: str) -> list[dict]:
    """The agent spans above ``span_id``, nearest first."""
    found = []
    row = rows[span_id]
    while row["parent_span_id"] in rows:
        row = rows[row["parent_span_id"]]
        if agent_of(row):
            found.append(row)
    return found


def parent_agent(name: str, invocation) -> str:
    session, _ = invocation_of(name, invocation.calls[0])
    return next(other.agent for other in session.invocations if other.id == invocation.parent)


@pytest.mark.parametrize("name", AGENT_SCENARIOS)
def test_each_recorded_call_sits_under_the_agent_the_expectation_names(name):
    """EXPECTED's agents and invocations match the recording's agent spans (needs no packages)."""
    description, rows = fixture_spans(name)
    invocation_spans: dict[str, set[str]] = {}
    for call in description["calls"]:
        _session, invocation = invocation_of(name, call["index"])
        assert call["agent"] == invocation.agent  # what the scenario scripted
        agent_span, *outer = agent_ancestors(rows, call["span"]["span_id"])
        assert agent_of(agent_span) == invocation.agent, f"call {call['index']}"
        invocation_spans.setdefault(invocation.id, set()).add(agent_span["span_id"])
        if invocation.entered in ("agent_as_tool", "delegation"):
            # Nested: the child's agent span sits under a tool span of its parent's agent span.
            assert agent_of(outer[0]) == parent_agent(name, invocation)
            tool = rows[agent_span["parent_span_id"]]
            if invocation.entered == "delegation":
                assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
            else:  # openai-agents puts its own "Agent workflow" span between the tool and the agent
                tool = rows[tool["parent_span_id"]]
                assert tool["attributes"]["openinference.span.kind"] == "TOOL"
        elif invocation.entered == "handoff":
            # Siblings under the workflow span; graph.node.parent_id names the agent handing off.
            assert outer == []
            assert agent_span["attributes"]["graph.node.parent_id"] == parent_agent(name, invocation)
            handoffs = [row for row in rows.values() if row["name"] == f"handoff to {invocation.agent}"]
            assert [row["attributes"]["output.value"] for row in handoffs] == [invocation.agent]
        else:
            assert outer == []
    assert all(len(spans) == 1 for spans in invocation_spans.values())  # one agent span each

    if name.startswith("pydantic-ai"):
        # Each run has its own gen_ai.conversation.id, the child's too.
        conversation_of = {
            call["agent"]: rows[call["span"]["span_id"]]["attributes"]["gen_ai.conversation.id"]
            for call in description["calls"]
        }
        assert len(set(conversation_of.values())) == len(conversation_of) == 2


@pytest.mark.parametrize("name", list(EXPECTED))
def test_genuine_cache_breaks_are_where_an_agent_sent_another_system_prompt(name):
    """EXPECTED's cache breaks match what the fake provider received and the scripted cache figures."""
    description = json.loads((FIXTURES / f"{name}.json").read_text())["description"]
    requests = description["provider_requests"]
    assert len(requests) == len(description["calls"])
    chains: dict[str | None, list[int]] = {}  # each agent's calls in order; one chain without agents
    for call in description["calls"]:
        invocation = invocation_of(name, call["index"])[1]
        chains.setdefault(invocation.agent if invocation else None, []).append(call["index"])
    breaks = set()
    for indices in chains.values():
        for previous, index in itertools.pairwise(indices):
            if requests[index]["system"] != requests[previous]["system"]:
                breaks.add(index)
                assert description["calls"][index]["canonical"]["cache_read"] == 0
            else:
                assert description["calls"][index]["canonical"]["cache_read"] > 0
    assert breaks == EXPECTED[name].cache_breaks


# --- The fake provider --------------------------------------------------------------------------


def test_the_fake_provider_answers_in_order_streams_on_request_and_records_mismatches():
    import urllib.error
    import urllib.request

    from tests.instrumented import fake_providers as fp

    usage = fp.anthropic_usage(5, 7, cache_creation_input_tokens=11, cache_read_input_tokens=13)
    replies = [
        fp.openai_reply(id="chatcmpl-a", model="m", text="hi", usage=fp.openai_usage(3, 2, cached_tokens=1)),
        fp.anthropic_reply(id="msg_b", model="m", text="hello", usage=usage),
    ]

    def post(url: str, body: dict):
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.headers["Content-Type"], response.read().decode()

    with fp.FakeProvider(replies) as fake:
        with pytest.raises(urllib.error.HTTPError) as wrong:
            post(fake.url + fp.ANTHROPIC_MESSAGES, {"model": "m"})  # the head of the queue is OpenAI's
        assert wrong.value.code == 500
        content_type, body = post(fake.openai_base_url + "/chat/completions", {"model": "m"})
        assert content_type == "application/json"
        assert json.loads(body)["usage"]["prompt_tokens_details"]["cached_tokens"] == 1
        content_type, body = post(fake.url + fp.ANTHROPIC_MESSAGES, {"model": "m", "stream": True})
        assert content_type.startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
        assert [event["type"] for event in events][0] == "message_start"
        assert events[0]["message"]["usage"]["output_tokens"] == fp.STREAM_START_OUTPUT_TOKENS
        assert events[-2]["usage"] == {
            "input_tokens": 5,
            "cache_creation_input_tokens": 11,
            "cache_read_input_tokens": 13,
            "output_tokens": 7,
        }
        assert fake.pending == 0
        assert fake.errors == ["expected a request to /v1/chat/completions, got /v1/messages"]
        assert [request.streamed for request in fake.requests] == [False, False, True]
