"""strands-agents' own telemetry for a swarm handoff (issue 33), from a recording of the real strands-agents
1.62.0 against the fake OpenAI API (tests/data/recordings/strands-swarm.json, made by
tests/instrumented/record_strands.py in a venv of its own: strands' OpenAI provider pins openai<3).

One user message; the researcher calls a tool, hands off to the writer through the swarm's
``handoff_to_agent`` tool and answers once more; the writer answers. Spans (scope
``strands.telemetry.tracer``): ``invoke_swarm`` › ``invoke_agent {name}`` (``gen_ai.agent.name``, the
run's summed usage) › ``execute_event_loop_cycle`` › ``chat`` and ``execute_tool {name}``. A ``chat`` span
names no provider (``gen_ai.system=strands-agents``), carries ``gen_ai.usage.input_tokens`` (the prompt,
cache included) and ``gen_ai.usage.cache_read.input_tokens`` but no cache write, no tool definitions
(only their names, on ``invoke_agent`` as ``gen_ai.agent.tools``), and the content as span events
(``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``,
``gen_ai.choice``) in strands' own content blocks (``toolUse``, ``toolResult``), the finish reason
(``tool_use``, ``end_turn``) only on the ``gen_ai.choice`` event."""

import json
from pathlib import Path

from tests import factories
from tests.instrumented.test_agents import post_traces, read

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recordings" / "strands-swarm.json"


def test_a_swarm_handoff_is_one_run_two_agents_exact_usage_and_no_break(
    client, alice, django_capture_on_commit_callbacks
):
    document = json.loads(RECORDING.read_text())
    described = document["description"]
    assert described["problems"] == [] and described["requests"] == 4
    assert described["node_history"] == ["researcher", "writer"]
    assert all(call["streamed"] for call in described["calls"])
    _project, key = factories.project_with_key("strands", owner=alice)
    post_traces(client, django_capture_on_commit_callbacks, key, json.dumps(document["traces"]).encode())
    [run] = read(client, key).values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    # The invoke_agent spans carry the agent's summed usage: not calls.
    assert [call["name"] for call in calls] == ["chat"] * 4
    assert [call["agent"] for call in calls] == [call["agent"] for call in described["calls"]]
    assert [(agent["name"], agent["calls"]) for agent in run["detail"]["agents"]] == [
        ("researcher", 3),
        ("writer", 1),
    ]
    for call, expected in zip(calls, described["calls"], strict=True):
        usage = expected["usage"]
        # No provider on the span and no cache-write figure: the write, so the uncached part, is unknown.
        assert call["usage"] == {
            "uncached": None,
            "cache_write": None,
            "cache_read": usage["prompt_tokens_details"]["cached_tokens"],
            "output": usage["completion_tokens"],
            "reasoning": None,
            "prompt_total": usage["prompt_tokens"],
        }, call["seq"]
        assert call["tool_definitions"] is None  # the chat span carries none
    # The writer's window starts with its own instructions and the swarm's handoff context.
    assert [item["kind"] for item in calls[3]["items"]] == ["system", "message"]
    # The tool calls from the gen_ai.choice events' toolUse blocks, their finish reasons beside them.
    for call in calls:
        detail = client.get(f"/api/v1/calls/{call['id']}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
        call["tool_calls"], call["finish_reasons"] = detail["tool_calls"], detail["finish_reasons"]
    assert [[tool["name"] for tool in call["tool_calls"]] for call in calls] == [
        [expected["tool_call"]] if expected["tool_call"] else [] for expected in described["calls"]
    ]
    assert [call["finish_reasons"] for call in calls] == [["tool_call"], ["tool_call"], ["stop"], ["stop"]]
    # One user message, one turn: the writer is the swarm's second agent, handed the work by the
    # researcher (its user message is the swarm's handoff context, not the user's). It was 2 turns.
    assert [call["turn"] for call in calls] == [1, 1, 1, 1]
    invocations = sorted(run["detail"]["invocations"], key=lambda entry: entry["seqs"])
    assert [(entry["agent"], entry["entered"], entry["seqs"]) for entry in invocations] == [
        ("researcher", "root", [1, 2, 3]),
        ("writer", "handoff", [4]),
    ]
    assert invocations[1]["parent"] == invocations[0]["id"]
    # No break: the writer's first call starts a cache chain of its own.
    assert run["findings"] == []
