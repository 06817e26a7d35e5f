"""The proxy passes what it forwards unchanged, streams as it arrives, and records only model calls.

Real clients (httpx for the raw bytes, the anthropic and openai SDKs) through the proxy to the local fake
provider; the recorded spans are read from the spool (nothing is sent anywhere here).
"""

import json
import threading

import anthropic
import httpx
import openai
import pytest

from ctxview.proxy.export import service_of
from ctxview.proxy.server import Proxy, Running
from tests.instrumented.fake_providers import (
    ANTHROPIC_MESSAGES,
    Reply,
    anthropic_reply,
    anthropic_sse,
    anthropic_usage,
    openai_reply,
    openai_usage,
    responses_reply,
    responses_usage,
)
from tests.proxy.conftest import PROVIDER_KEY

MESSAGES_BODY = {"model": "claude-fake-1", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def recorded(recorder, proxy) -> list[dict]:
    assert proxy.settled() and recorder.flush(10)
    return [span for _name, span in recorder.spool.oldest(1000)]


def end_to_end(headers: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower() not in ("host", "connection")}


def comparable(headers: httpx.Headers) -> list[tuple[str, str]]:
    return [(name, value) for name, value in headers.multi_items() if name.lower() != "date"]


@pytest.mark.parametrize("stream", [False, True])
def test_the_client_gets_exactly_the_upstreams_bytes(fake, proxy, stream):
    reply = anthropic_reply(
        id="msg_1", model="claude-fake-1", text="hello there", usage=anthropic_usage(3, 2)
    )
    fake.enqueue(reply, reply)
    body = json.dumps(MESSAGES_BODY | {"stream": stream}).encode()
    headers = {"x-api-key": PROVIDER_KEY, "content-type": "application/json"}
    direct = httpx.post(fake.url + ANTHROPIC_MESSAGES, content=body, headers=headers)
    through = httpx.post(proxy.url + "/anthropic" + ANTHROPIC_MESSAGES, content=body, headers=headers)

    assert through.status_code == direct.status_code == 200
    assert through.content == direct.content
    assert through.content == (anthropic_sse(reply.body) if stream else json.dumps(reply.body).encode())
    assert comparable(through.headers) == comparable(direct.headers)
    # What the upstream got: the same body and end-to-end headers (names are case-insensitive; the
    # upstream's own Host; Connection is hop-by-hop).
    sent, forwarded = fake.requests
    assert forwarded.body == sent.body
    assert end_to_end(forwarded.headers) == end_to_end(sent.headers)


def test_hop_by_hop_and_ctxview_headers_are_not_forwarded(fake, proxy, recorder):
    fake.enqueue(anthropic_reply(id="msg_1", model="m", text="ok", usage=anthropic_usage(3, 2)))
    headers = {
        "x-api-key": PROVIDER_KEY,
        "Connection": "keep-alive, X-Hop",
        "X-Hop": "named by Connection",
        "Proxy-Authorization": "Basic eA==",
        "X-End-To-End": "kept",
        "X-Ctxview-Run": "nightly-eval",
        "X-Ctxview-Agent": "planner",
    }
    response = httpx.post(proxy.url + "/anthropic" + ANTHROPIC_MESSAGES, json=MESSAGES_BODY, headers=headers)
    assert response.status_code == 200

    received = {name.lower() for name in fake.requests[0].headers}
    assert "x-end-to-end" in received and "x-api-key" in received
    assert not received & {"x-hop", "proxy-authorization", "x-ctxview-run", "x-ctxview-agent"}
    (span,) = recorded(recorder, proxy)
    assert span["attributes"]["ctxview.run.id"] == "nightly-eval"
    assert span["attributes"]["ctxview.proxy.run_rule"] == "header"
    assert span["attributes"]["gen_ai.agent.name"] == "planner"


def test_the_first_event_reaches_the_client_before_the_upstream_has_finished(fake, proxy):
    hold = threading.Event()
    reply = anthropic_reply(id="msg_1", model="m", text="a long answer", usage=anthropic_usage(3, 2))
    reply.hold = hold
    fake.enqueue(reply)
    body = MESSAGES_BODY | {"stream": True}
    with httpx.stream(
        "POST", proxy.url + "/anthropic" + ANTHROPIC_MESSAGES, json=body, timeout=10
    ) as response:
        chunks = response.iter_raw()
        first = b""
        while b"\n\n" not in first:
            first += next(chunks)
        assert first.startswith(b"event: message_start\n")
        assert not hold.is_set()  # the upstream is still holding the rest of its stream
        hold.set()
        rest = b"".join(chunks)
    assert first + rest == anthropic_sse(reply.body)


@pytest.mark.parametrize("status", [400, 429, 529])
def test_upstream_errors_reach_the_client_as_they_were(fake, proxy, recorder, status):
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.enqueue(Reply(ANTHROPIC_MESSAGES, error, status=status))
    client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(**MESSAGES_BODY)
    assert raised.value.status_code == status
    assert raised.value.response.content == json.dumps(error).encode()
    (span,) = recorded(recorder, proxy)
    assert span["attributes"]["error.type"] == str(status)
    assert span["error"] is True
    assert "gen_ai.usage.input_tokens" not in span["attributes"]


def test_an_unreachable_upstream_is_a_502(recorder):
    running = Running(Proxy({"anthropic": "http://127.0.0.1:9"}, recorder.submit)).start()
    try:
        response = httpx.post(running.url + "/anthropic" + ANTHROPIC_MESSAGES, json=MESSAGES_BODY)
        (span,) = recorded(recorder, running)
    finally:
        running.stop()
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "ctxview_proxy_error"
    assert span["attributes"]["error.type"] == "upstream_unreachable"


def test_an_unknown_route_is_a_404(proxy):
    assert httpx.get(proxy.url + "/mistral/v1/models").status_code == 404


def test_count_tokens_passes_through_unrecorded(fake, proxy, recorder):
    fake.enqueue(Reply(ANTHROPIC_MESSAGES + "/count_tokens", {"input_tokens": 12}))
    client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    counted = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
    assert counted.input_tokens == 12
    assert recorded(recorder, proxy) == []


def test_anthropic_calls_are_recorded_with_their_window_and_cache_figures(fake, proxy, recorder):
    usage = anthropic_usage(21, 9, cache_creation_input_tokens=1200, cache_read_input_tokens=3400)
    usage["cache_creation"]["ephemeral_1h_input_tokens"] = 200
    usage["cache_creation"]["ephemeral_5m_input_tokens"] = 1000
    diagnostics = {
        "diagnostics": {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 900}}
    }
    tool_use = [("toolu_1", "read_file", {"path": "notes.txt"})]
    fake.enqueue(
        anthropic_reply(id="msg_a", model="claude-fake-1", usage=usage, text="Reading.", tool_uses=tool_use),
        anthropic_reply(id="msg_b", model="claude-fake-1", usage=usage, text="Tuesday.", extra=diagnostics),
    )
    client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": "When is the deploy window?"}]
    first = client.messages.create(
        model="claude-fake-1", max_tokens=64, system=system, tools=TOOLS, messages=messages
    )
    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Tuesday"}],
        },
    ]
    with client.messages.stream(
        model="claude-fake-1", max_tokens=64, system=system, tools=TOOLS, messages=messages
    ) as stream:
        assert stream.get_final_text() == "Tuesday."

    calls = [span["attributes"] for span in recorded(recorder, proxy)]
    assert [call["gen_ai.response.id"] for call in calls] == ["msg_a", "msg_b"]
    assert [call["gen_ai.request.stream"] for call in calls] == [False, True]
    for call in calls:
        assert call["gen_ai.usage.input_tokens"] == 21 + 1200 + 3400  # the conventions' inclusive figure
        assert call["gen_ai.usage.cache_read.input_tokens"] == 3400
        assert call["gen_ai.usage.cache_creation.input_tokens"] == 1200
        assert call["gen_ai.usage.output_tokens"] == 9
        assert call["anthropic.usage.cache_creation.ephemeral_1h_input_tokens"] == 200
        assert json.loads(call["gen_ai.system_instructions"]) == [
            {"type": "text", "content": "You are terse."}
        ]
        assert json.loads(call["gen_ai.tool.definitions"]) == [
            {
                "type": "function",
                "name": "read_file",
                "description": "Read a file.",
                "parameters": TOOLS[0]["input_schema"],
            }
        ]
    assert calls[0]["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert json.loads(calls[0]["gen_ai.output.messages"])[0]["parts"][1] == {
        "type": "tool_call",
        "id": "toolu_1",
        "name": "read_file",
        "arguments": {"path": "notes.txt"},
    }
    second_input = json.loads(calls[1]["gen_ai.input.messages"])
    assert [message["role"] for message in second_input] == ["user", "assistant", "user"]
    assert second_input[2]["parts"] == [
        {"type": "tool_call_response", "id": "toolu_1", "response": "Tuesday"}
    ]
    assert calls[1]["anthropic.diagnostics.cache_miss_reason.type"] == "tools_changed"
    assert calls[1]["anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens"] == 900


def test_openai_chat_streams_with_tool_calls_are_reassembled(fake, proxy, recorder):
    fake.enqueue(
        openai_reply(
            id="chatcmpl-1",
            model="gpt-4.1-2025-04-14",
            usage=openai_usage(2006, 12, cached_tokens=1920, reasoning_tokens=4),
            tool_calls=[("call_1", "read_file", {"path": "notes.txt"})],
        )
    )
    client = openai.OpenAI(base_url=proxy.url + "/openai/v1", api_key=PROVIDER_KEY, max_retries=0)
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]
    stream = client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Deploy window?"}],
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert [chunk.id for chunk in stream][0] == "chatcmpl-1"

    (span,) = recorded(recorder, proxy)
    call = span["attributes"]
    assert span["service"] == "openai"
    assert call["gen_ai.provider.name"] == "openai"
    assert (call["gen_ai.request.model"], call["gen_ai.response.model"]) == ("gpt-4.1", "gpt-4.1-2025-04-14")
    assert call["gen_ai.usage.input_tokens"] == 2006  # prompt_tokens already includes cached_tokens
    assert call["gen_ai.usage.cache_read.input_tokens"] == 1920
    assert call["gen_ai.usage.reasoning.output_tokens"] == 4
    assert call["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert json.loads(call["gen_ai.input.messages"])[0] == {
        "role": "system",
        "parts": [{"type": "text", "content": "Be terse."}],
    }
    output = json.loads(call["gen_ai.output.messages"])
    assert output[0]["parts"] == [
        {"type": "tool_call", "id": "call_1", "name": "read_file", "arguments": {"path": "notes.txt"}}
    ]
    assert json.loads(call["gen_ai.tool.definitions"]) == [
        {"type": "function", "name": "read_file", "parameters": {"type": "object"}}
    ]


def test_the_responses_api_is_recorded(fake, proxy, recorder):
    fake.enqueue(
        responses_reply(
            id="resp_1",
            model="gpt-5",
            usage=responses_usage(900, 40, cached_tokens=512, reasoning_tokens=30),
            tool_calls=[("call_9", "read_file", {"path": "a"})],
        )
    )
    client = openai.OpenAI(base_url=proxy.url + "/openai/v1", api_key=PROVIDER_KEY, max_retries=0)
    response = client.responses.create(
        model="gpt-5",
        instructions="Answer briefly.",
        input=[
            {"role": "user", "content": "What is in a?"},
            {"type": "function_call", "call_id": "call_0", "name": "read_file", "arguments": '{"path": "b"}'},
            {"type": "function_call_output", "call_id": "call_0", "output": "nothing"},
        ],
        tools=[{"type": "function", "name": "read_file", "parameters": {"type": "object"}, "strict": False}],
    )
    assert response.id == "resp_1"

    (span,) = recorded(recorder, proxy)
    call = span["attributes"]
    assert json.loads(call["gen_ai.system_instructions"]) == [{"type": "text", "content": "Answer briefly."}]
    assert [message["role"] for message in json.loads(call["gen_ai.input.messages"])] == [
        "user",
        "assistant",
        "tool",
    ]
    assert (call["gen_ai.usage.input_tokens"], call["gen_ai.usage.cache_read.input_tokens"]) == (900, 512)
    assert (call["gen_ai.usage.output_tokens"], call["gen_ai.usage.reasoning.output_tokens"]) == (40, 30)
    assert call["gen_ai.response.finish_reasons"] == ["tool_call"]


def test_the_provider_key_is_never_spooled(fake, proxy, recorder, spool):
    fake.enqueue(anthropic_reply(id="msg_1", model="m", text="ok", usage=anthropic_usage(3, 2)))
    client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    client.messages.create(**MESSAGES_BODY)
    (span,) = recorded(recorder, proxy)
    assert span["attributes"]["ctxview.proxy.key_hash"]
    for path in spool.directory.iterdir():
        assert PROVIDER_KEY.encode() not in path.read_bytes()


def test_calls_without_headers_are_grouped_by_key_client_and_time(fake, proxy, recorder):
    for number in range(3):
        fake.enqueue(anthropic_reply(id=f"msg_{number}", model="m", text="ok", usage=anthropic_usage(3, 2)))
    for key in (PROVIDER_KEY, PROVIDER_KEY, "sk-another-key"):
        client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=key, max_retries=0)
        client.messages.create(**MESSAGES_BODY)
    runs = [span["attributes"]["ctxview.run.id"] for span in recorded(recorder, proxy)]
    assert runs[0] == runs[1] != runs[2]
    assert runs[0].startswith("proxy-")


def test_a_claude_code_session_header_names_the_run(fake, proxy, recorder):
    fake.enqueue(anthropic_reply(id="msg_1", model="m", text="ok", usage=anthropic_usage(3, 2)))
    headers = {"X-Claude-Code-Session-Id": "5b1c-session", "x-claude-code-agent-id": "agent-7"}
    client = anthropic.Anthropic(
        base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0, default_headers=headers
    )
    client.messages.create(**MESSAGES_BODY)
    (span,) = recorded(recorder, proxy)
    assert span["attributes"]["gen_ai.conversation.id"] == "5b1c-session"
    assert span["attributes"]["gen_ai.agent.id"] == "agent-7"
    assert "ctxview.run.id" not in span["attributes"]
    # The session header is the client's own: it is forwarded.
    assert fake.requests[0].headers["X-Claude-Code-Session-Id"] == "5b1c-session"


def test_service_is_the_clients_product_name():
    assert service_of("claude-cli/2.1.332 (external, cli)") == "claude-cli"
    assert service_of("Anthropic/Python 2.14.0") == "anthropic"
    assert service_of("") == "ctxview-proxy"
