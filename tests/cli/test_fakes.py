"""The provider fakes, driven by the real anthropic and openai SDKs (and plain HTTP for Gemini)."""

import json
import urllib.request

import anthropic
import openai
import pytest

from tests.cli import fakes
from tests.cli.fakes import FakeAPI, Step, ToolCall, Usage

TOOL = {"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}
SCRIPT = [
    Step("ask", Usage(12, 40, cache_write=900, cache_write_1h=300, reasoning=5), prompt="[one]",
         tool_call=ToolCall("read", {"path": "notes.txt"}, "call_1")),
    Step("answer", Usage(7, 20, cache_read=900, cache_write=15, reasoning=3), after_call="call_1",
         text="Tuesday."),
]  # fmt: skip


@pytest.fixture
def fake(request):
    with FakeAPI(request.param, list(SCRIPT)) as running:
        yield running


@pytest.mark.parametrize("fake", [fakes.ANTHROPIC], indirect=True)
def test_anthropic_sdk_streams_the_scripted_replies_with_their_usage(fake):
    client = anthropic.Anthropic(base_url=fake.url, api_key="test", max_retries=0)
    messages = [{"role": "user", "content": [{"type": "text", "text": "[one] when?"}]}]

    with client.messages.stream(model="claude-x", max_tokens=100, messages=messages, tools=[TOOL]) as stream:
        first = stream.get_final_message()
    messages += [
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Tuesday"}]},
    ]
    with client.messages.stream(model="claude-x", max_tokens=100, messages=messages, tools=[TOOL]) as stream:
        second = stream.get_final_message()
    side = client.messages.create(
        model="claude-y", max_tokens=10, messages=[{"role": "user", "content": "t"}]
    )

    assert [(b.type, b.id, b.name, b.input) for b in first.content] == [
        ("tool_use", "call_1", "read", {"path": "notes.txt"})
    ]
    usage = first.usage
    assert (usage.input_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (
        12,
        900,
        0,
    )
    assert (usage.cache_creation.ephemeral_1h_input_tokens, usage.output_tokens) == (300, 40)
    assert second.content[0].text == "Tuesday." and second.usage.cache_read_input_tokens == 900
    assert side.usage.input_tokens == fakes.side_usage(2).uncached
    assert [(r.step, r.tools_sent, r.stream, r.messages) for r in fake.received] == [
        ("ask", True, True, 1),
        ("answer", True, True, 3),
        (None, False, False, 1),
    ]
    assert fake.unused_steps == []
    assert len({r.request_id for r in fake.received}) == 3


@pytest.mark.parametrize("fake", [fakes.OPENAI_RESPONSES], indirect=True)
def test_openai_sdk_streams_responses_with_inclusive_input(fake):
    client = openai.OpenAI(base_url=f"{fake.url}/v1", api_key="test", max_retries=0)
    tools = [{"type": "function", "name": "read", "parameters": {"type": "object", "properties": {}}}]

    events = list(client.responses.create(model="gpt-x", input="[one] when?", tools=tools, stream=True))
    first = events[-1].response
    call = first.output[0]
    follow_up = [{"type": "function_call_output", "call_id": call.call_id, "output": "Tuesday"}]
    second = list(client.responses.create(model="gpt-x", input=follow_up, tools=tools, stream=True))[
        -1
    ].response

    assert [event.type for event in events][0] == "response.created"
    assert (events[-1].type, call.type, call.call_id, json.loads(call.arguments)) == (
        "response.completed",
        "function_call",
        "call_1",
        {"path": "notes.txt"},
    )
    assert first.usage.input_tokens == 12 + 900
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.output_tokens_details.reasoning_tokens == 5
    assert second.output_text == "Tuesday." and second.usage.input_tokens == 7 + 900 + 15
    assert [r.step for r in fake.received] == ["ask", "answer"] and fake.unused_steps == []


@pytest.mark.parametrize("fake", [fakes.GEMINI], indirect=True)
def test_gemini_streams_and_counts_thoughts_apart(fake):
    def post(path, body):
        request = urllib.request.Request(
            f"{fake.url}/v1beta/models/gemini-x:{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read().decode()

    tools = [{"functionDeclarations": [{"name": "read"}]}]
    streamed = post(
        "streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "[one]"}]}], "tools": tools},
    )
    reply = json.loads(streamed.removeprefix("data: "))
    result = {"functionResponse": {"id": "call_1", "name": "read", "response": {"output": "Tuesday"}}}
    second = json.loads(
        post("generateContent", {"contents": [{"role": "user", "parts": [result]}], "tools": tools})
    )

    assert reply["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"id": "call_1", "name": "read", "args": {"path": "notes.txt"}}}
    ]
    assert reply["usageMetadata"] == {
        "promptTokenCount": 12,
        "cachedContentTokenCount": 0,
        "candidatesTokenCount": 35,
        "thoughtsTokenCount": 5,
        "totalTokenCount": 52,
    }
    assert second["candidates"][0]["content"]["parts"] == [{"text": "Tuesday."}]
    assert [(r.step, r.stream, r.model) for r in fake.received] == [
        ("ask", True, "gemini-x"),
        ("answer", False, "gemini-x"),
    ]
