"""google-adk's own telemetry (issue 33, items 5 and 8), from a recording of the real google-adk 2.13.0
against the fake Gemini API (tests/data/recordings/google-adk.json, made by
tests/instrumented/record_adk.py in a venv of its own: google-adk pins opentelemetry-sdk<=1.44).

One agent with one tool, two user messages in one session: the first takes a function call and an answer,
the second one answer. The Gemini API leaves out cache-read and thoughts figures of 0, and ADK passes
them on as they come: ctxview read those as unknown on the first call (and the write inferred 0 on
another), although it reads the same omission as 0 for the google-genai instrumentation."""

import json
from pathlib import Path

from tests import factories
from tests.instrumented.test_agents import post_traces, read

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recordings" / "google-adk.json"


def test_an_adk_session_has_exact_usage_one_agent_and_a_turn_per_user_message(
    client, alice, django_capture_on_commit_callbacks
):
    document = json.loads(RECORDING.read_text())
    described = document["description"]
    assert described["problems"] == [] and described["requests"] == 3
    _project, key = factories.project_with_key("adk", owner=alice)
    post_traces(client, django_capture_on_commit_callbacks, key, json.dumps(document["traces"]).encode())
    [run] = read(client, key).values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert [call["agent"] for call in calls] == ["weather_agent"] * 3
    assert [call["turn"] for call in calls] == [1, 1, 2]
    for call, expected in zip(calls, described["calls"], strict=True):
        usage = expected["usage"]
        cached = usage.get("cachedContentTokenCount", 0)
        assert call["usage"] == {
            "uncached": usage["promptTokenCount"] - cached,
            "cache_write": 0,  # Gemini writes caches through another API
            "cache_read": cached,
            "output": usage["candidatesTokenCount"],
            "reasoning": 0,
            "prompt_total": usage["promptTokenCount"],
        }, call["seq"]
    # google-adk's telemetry records no content: which tools a call asked for is unknown, so no tool is
    # reported unused (it reported get_weather, which the agent called).
    assert run["findings"] == []
