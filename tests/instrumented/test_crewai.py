"""CrewAI under OpenInference's event listener (issue 33, items 1, 6 and 8), from a recording of the real
CrewAI 1.15.30 and openinference-instrumentation-crewai 1.1.21 against the fake OpenAI API
(tests/data/recordings/openinference-crewai.json, made by tests/instrumented/record_crewai.py in a venv of its
own: CrewAI pins openai<3).

Two agents, one task each, in sequence: the researcher calls a tool and answers, the writer answers. The
instrumentation sends the tool definitions as one JSON attribute (``llm.tools``, the provider's shape),
names each agent only by ``graph.node.id`` (its role), and marks the second task's agent as handed
work from the first (``graph.node.parent_id``). ctxview read no tool definitions, no agent, and the
writer's first call as a ``system_changed`` break against the researcher's."""

import json
from pathlib import Path

from tests import factories
from tests.instrumented.test_agents import post_traces, read

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recordings" / "openinference-crewai.json"


def test_a_crew_of_two_agents_is_one_turn_two_agents_their_tools_and_no_break(
    client, alice, django_capture_on_commit_callbacks
):
    document = json.loads(RECORDING.read_text())
    described = document["description"]
    assert described["problems"] == [] and described["requests"] == 3
    _project, key = factories.project_with_key("crew", owner=alice)
    post_traces(client, django_capture_on_commit_callbacks, key, json.dumps(document["traces"]).encode())
    [run] = read(client, key).values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert [call["agent"] for call in calls] == [call["agent"] for call in described["calls"]]
    assert [call["turn"] for call in calls] == [1, 1, 1]
    for call, expected in zip(calls, described["calls"], strict=True):
        detail = client.get(f"/api/v1/calls/{call['id']}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
        assert (detail["tool_definitions"] or []) == expected["tools_offered"], call["seq"]
        assert call["usage"]["prompt_total"] == expected["usage"]["prompt_tokens"]
    # The researcher's second window holds get_weather's result (the history names the tool as a Python
    # literal, 'get_weather'): it was called, so it is not reported unused.
    assert run["findings"] == []
