"""The proxy reads an Anthropic content block as ingest does (``block_part``): thinking, redacted
thinking, server tools and their results, images and documents, and tool use whose input is an object or
a string. A call recorded by the proxy and the same call read by ingest make the same parts, so the same
items (ids, hashes, token counts); and a streamed answer is recorded as the same answer sent whole."""

import json

import pytest

from ctxview.proxy.exchange import Exchange
from ctxview.proxy.record import INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, attributes_of
from ingest.families.messages import block_part, message
from ingest.normalise import call_record, derive_items

SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds" * 4
BLOCKS = {
    "text": {"type": "text", "text": "Look this up."},
    "thinking": {"type": "thinking", "thinking": "The user wants the weather.", "signature": SIGNATURE},
    "redacted_thinking": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a" * 3},
    "server_tool_use": {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "weather in Paris"},
    },
    "web_search_tool_result": {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_01",
        "content": [
            {
                "type": "web_search_result",
                "url": "https://example.com/paris",
                "title": "Paris weather",
                "encrypted_content": "EqgfCioIARgBIiQ3",
                "page_age": "1 day ago",
            }
        ],
    },
    "mcp_tool_use": {
        "type": "mcp_tool_use",
        "id": "mcptoolu_01",
        "name": "echo",
        "server_name": "s",
        "input": {},
    },
    "tool_use (object input)": {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "get_weather",
        "input": {"city": "Paris"},
    },
    "tool_use (string input)": {
        "type": "tool_use",
        "id": "toolu_02",
        "name": "get_weather",
        "input": '{"city": "Oslo"}',
    },
    "tool_result": {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": [{"type": "text", "text": "12 C"}],
    },
    "image (base64)": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    },
    "image (url)": {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    "document (file)": {
        "type": "document",
        "source": {"type": "file", "file_id": "file_011"},
        "title": "Spec",
    },
    "document (text)": {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": "The spec."},
        "citations": {"enabled": True},
    },
}
# What an assistant sends back (and a model answers); the rest are the user's.
ANSWERED = ("thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result", "text")
ANSWERED += ("tool_use (object input)",)
ASSISTANT = (*ANSWERED, "mcp_tool_use", "tool_use (string input)")


def exchange(request: dict, response: bytes, content_type: str = "application/json") -> Exchange:
    return Exchange(
        route="anthropic",
        method="POST",
        path="/v1/messages",
        request_headers={},
        request_body=json.dumps(request).encode(),
        status=200,
        response_headers={"content-type": content_type},
        response_body=response,
        start_ns=1_000,
        end_ns=2_000,
    )


def answer(content: list[dict]) -> dict:
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake-1",
        "content": content,
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def span(attributes: dict) -> dict:
    return {
        "trace_id": "0" * 32,
        "span_id": "1" * 16,
        "name": "chat claude-fake-1",
        "start_time_unix_nano": 1_000,
        "end_time_unix_nano": 2_000,
        "attributes": attributes,
    }


@pytest.mark.parametrize("kind", list(BLOCKS))
def test_the_proxy_reads_each_block_as_ingest_does(kind):
    block = BLOCKS[kind]
    role = "assistant" if kind in ASSISTANT else "user"
    request = {
        "model": "claude-fake-1",
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": "hi"}, {"role": role, "content": [block]}],
    }
    attributes = attributes_of(exchange(request, json.dumps(answer([block])).encode()))

    ingest_reads = [message("user", [block_part("hi")]), message(role, [block_part(block)])]
    assert json.loads(attributes[INPUT_MESSAGES]) == ingest_reads
    assert json.loads(attributes[OUTPUT_MESSAGES])[0]["parts"] == [block_part(block)]
    record = call_record(span(attributes), {})
    system = [block_part({"type": "text", "text": "Be brief."})]
    assert json.loads(attributes[SYSTEM_INSTRUCTIONS]) == system
    assert [(item.id, item.kind, item.hash, item.tokens) for item in record.items] == [
        (item.id, item.kind, item.hash, item.tokens) for item in derive_items(None, system, ingest_reads)
    ]


def sse(events: list[dict]) -> bytes:
    return b"".join(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events)


def test_a_streamed_answer_is_recorded_as_the_same_answer_sent_whole():
    blocks = [BLOCKS[kind] for kind in ANSWERED]
    thinking, redacted, server_use, search_result, text, tool_use = blocks
    whole = answer(blocks)
    events = [{"type": "message_start", "message": whole | {"content": [], "stop_reason": None}}]

    def block(index: int, started: dict, *deltas: dict) -> None:
        events.append({"type": "content_block_start", "index": index, "content_block": started})
        events.extend({"type": "content_block_delta", "index": index, "delta": delta} for delta in deltas)
        events.append({"type": "content_block_stop", "index": index})

    halves = (thinking["thinking"][:10], thinking["thinking"][10:])
    block(
        0,
        {"type": "thinking", "thinking": ""},
        *({"type": "thinking_delta", "thinking": half} for half in halves),
        {"type": "signature_delta", "signature": SIGNATURE},
    )
    block(1, redacted)
    query = json.dumps(server_use["input"])
    block(
        2,
        server_use | {"input": {}},
        {"type": "input_json_delta", "partial_json": query[:7]},
        {"type": "input_json_delta", "partial_json": query[7:]},
    )
    block(3, search_result)
    block(4, {"type": "text", "text": ""}, {"type": "text_delta", "text": text["text"]})
    arguments = {"type": "input_json_delta", "partial_json": json.dumps(tool_use["input"])}
    block(5, tool_use | {"input": {}}, arguments)
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}
    )
    events.append({"type": "message_stop"})
    request = {"model": "claude-fake-1", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    streamed = attributes_of(exchange(request, sse(events), "text/event-stream"))
    sent_whole = attributes_of(exchange(request | {"stream": False}, json.dumps(whole).encode()))

    assert json.loads(streamed[OUTPUT_MESSAGES])[0]["parts"] == [block_part(block) for block in blocks]
    assert streamed[OUTPUT_MESSAGES] == sent_whole[OUTPUT_MESSAGES]  # the same bytes: the same hashes
