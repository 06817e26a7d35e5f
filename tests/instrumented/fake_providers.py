"""A local fake of the OpenAI and Anthropic HTTP APIs, for driving the real SDKs and instrumentations.

Stdlib only (``http.server``), so the test process can import it without the instrumentation packages.

The server answers from a scripted queue: each :class:`Reply` names the path it expects and carries the
complete response body (an OpenAI ``chat.completion`` or an Anthropic ``message``). When the request asks
for a stream (``"stream": true``), the same body is sent as server-sent events in the provider's format,
with the usage figures where the real API puts them. Every request is recorded; a request that does not
match the head of the queue is answered with HTTP 500 and recorded as an error, so a scenario can fail
loudly instead of silently drifting.

    with FakeProvider() as fake:
        fake.enqueue(openai_reply(id="chatcmpl-1", model="gpt-4.1", text="hi", usage=openai_usage(10, 2)))
        client = openai.OpenAI(base_url=fake.openai_base_url, api_key="test", max_retries=0)
        ...
        assert fake.errors == [] and fake.pending == 0
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

OPENAI_CHAT = "/v1/chat/completions"
OPENAI_RESPONSES = "/v1/responses"
ANTHROPIC_MESSAGES = "/v1/messages"
RESPONSES_ECHOED = ("instructions", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p")
GEMINI_GENERATE = "/v1beta/models/{model}:generateContent"
BEDROCK_CONVERSE = "/model/{model}/converse"  # the model id as boto3 sends it, percent-encoded
CREATED = 1_767_225_600  # a fixed "created" timestamp for OpenAI replies
# output_tokens in a streamed message_start, as the real API sends a small non-zero count there.
STREAM_START_OUTPUT_TOKENS = 1


@dataclass
class Reply:
    """One scripted answer: the path it answers and the full (non-streaming) response body."""

    path: str
    body: dict[str, Any]
    status: int = 200
    # Streamed: send the first event, then wait for this event to be set before sending the rest (a test
    # can see the first event arrive while the stream is still open).
    hold: threading.Event | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    streamed: bool = False
    error: str | None = None


@dataclass
class FakeProvider:
    """A threaded HTTP server on 127.0.0.1 (port 0) serving scripted replies in order."""

    replies: list[Reply] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: deque[Reply] = deque(self.replies)
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle ---------------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        provider = self

        class Handler(_Handler):
            fake = provider

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # addresses ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "the fake provider is not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    # script ------------------------------------------------------------------------------------
    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def errors(self) -> list[str]:
        return [request.error for request in self.requests if request.error]

    def _take(self, path: str) -> tuple[Reply | None, str | None]:
        with self._lock:
            if not self._queue:
                return None, f"no scripted reply left for {path}"
            if self._queue[0].path != path:
                return None, f"expected a request to {self._queue[0].path}, got {path}"
            return self._queue.popleft(), None


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProvider
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # keep the test output quiet
        pass

    def do_GET(self) -> None:
        self._record_and_fail(None, f"unexpected GET {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        reply, error = self.fake._take(path)
        if reply is None:
            self._record_and_fail(body, error)
            return
        streamed = isinstance(body, dict) and bool(body.get("stream"))
        if streamed and path not in (OPENAI_CHAT, ANTHROPIC_MESSAGES):
            # Only Chat Completions and Messages streams are scripted; fail loudly rather than drift.
            self._record_and_fail(body, f"the fake does not stream {path}")
            return
        self.fake.requests.append(
            RecordedRequest("POST", path, dict(self.headers.items()), body, streamed=streamed)
        )
        if streamed and reply.status == 200:
            if path == ANTHROPIC_MESSAGES:
                payload = anthropic_sse(reply.body)
            else:
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                payload = openai_sse(reply.body, include_usage=include_usage)
            self._send(reply.status, payload, "text/event-stream; charset=utf-8", hold=reply.hold)
        else:
            reply_body = reply.body
            if path == OPENAI_RESPONSES and isinstance(body, dict):
                # The real Responses API echoes the request's settings; instrumentations read the
                # instructions and tools from the response object, not from the request.
                echoed = {name: body[name] for name in RESPONSES_ECHOED if body.get(name) is not None}
                reply_body = reply_body | echoed
            self._send(reply.status, json.dumps(reply_body).encode(), "application/json")

    def _record_and_fail(self, body, error: str | None) -> None:
        self.fake.requests.append(
            RecordedRequest(self.command, self.path, dict(self.headers.items()), body, error=error)
        )
        message = {"error": {"type": "fake_provider_error", "message": error}}
        self._send(500, json.dumps(message).encode(), "application/json")

    def _send(
        self, status: int, payload: bytes, content_type: str, hold: threading.Event | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", "req_fake")
        self.end_headers()
        if hold is not None:
            first, separator, rest = payload.partition(b"\n\n")
            self.wfile.write(first + separator)
            self.wfile.flush()
            hold.wait(30)
            payload = rest
        self.wfile.write(payload)


# ---------------------------------------------------------------------------------------------
# OpenAI Chat Completions
# ---------------------------------------------------------------------------------------------
def openai_usage(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> dict[str, Any]:
    """A ``CompletionUsage`` body. ``cached_tokens`` and ``cache_write_tokens`` are part of the prompt."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    prompt_details = {
        k: v
        for k, v in (("cached_tokens", cached_tokens), ("cache_write_tokens", cache_write_tokens))
        if v is not None
    }
    if prompt_details:
        usage["prompt_tokens_details"] = prompt_details | {"audio_tokens": 0}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {
            "reasoning_tokens": reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    return usage


def openai_reply(
    *,
    id: str,
    model: str,
    usage: dict[str, Any],
    text: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | None = None,
) -> Reply:
    """A ``chat.completion`` with one choice: text, or tool calls given as (id, name, arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for call_id, name, args in tool_calls
        ]
    body = {
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "service_tier": "default",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": usage,
    }
    return Reply(OPENAI_CHAT, body)


def openai_sse(body: dict[str, Any], include_usage: bool) -> bytes:
    """``body`` as ``chat.completion.chunk`` events; usage in a final chunk when it was asked for."""
    base = {k: body[k] for k in ("id", "created", "model", "system_fingerprint")} | {
        "object": "chat.completion.chunk"
    }
    choice = body["choices"][0]
    message = choice["message"]
    chunks = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]
    if message.get("content"):
        chunks.append({"index": 0, "delta": {"content": message["content"]}, "finish_reason": None})
    for number, call in enumerate(message.get("tool_calls") or []):
        delta = {"tool_calls": [{"index": number, **call}]}
        chunks.append({"index": 0, "delta": delta, "finish_reason": None})
    chunks.append({"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]})
    events = [base | {"choices": [chunk]} for chunk in chunks]
    if include_usage:
        events.append(base | {"choices": [], "usage": body["usage"]})
    lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
    return "".join(lines).encode()


# ---------------------------------------------------------------------------------------------
# Anthropic Messages
# ---------------------------------------------------------------------------------------------
def anthropic_usage(
    input_tokens: int,
    output_tokens: int,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
    ephemeral_1h_input_tokens: int = 0,
) -> dict[str, Any]:
    """A ``Usage`` body. ``input_tokens`` excludes both cache buckets, as in the real API."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation_input_tokens,
        "cache_read_input_tokens": cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": cache_creation_input_tokens - ephemeral_1h_input_tokens,
            "ephemeral_1h_input_tokens": ephemeral_1h_input_tokens,
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def anthropic_reply(
    *,
    id: str,
    model: str,
    usage: dict[str, Any],
    text: str | None = None,
    tool_uses: list[tuple[str, str, dict]] | None = None,
    extra: dict[str, Any] | None = None,
) -> Reply:
    """A ``message``: optional text, then tool_use blocks given as (id, name, input); ``extra`` adds
    fields (``diagnostics``, ``context_management``)."""
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for call_id, name, arguments in tool_uses or []:
        content.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
    body = {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if tool_uses else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    } | (extra or {})
    return Reply(ANTHROPIC_MESSAGES, body)


def anthropic_sse(body: dict[str, Any]) -> bytes:
    """``body`` as Messages streaming events, with usage where the real API sends it.

    ``message_start`` carries the input and cache figures and a small ``output_tokens``
    (``STREAM_START_OUTPUT_TOKENS``); ``message_delta`` carries the cumulative totals (output and, as
    the current API does, input and cache again). Consumers must replace, not add, these figures.
    """
    events: list[dict[str, Any]] = []

    def event(kind: str, **data) -> None:
        events.append({"type": kind, **data})

    usage = body["usage"]
    start_usage = dict(usage) | {"output_tokens": STREAM_START_OUTPUT_TOKENS}
    event("message_start", message=body | {"content": [], "stop_reason": None, "usage": start_usage})
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            event("content_block_start", index=index, content_block={"type": "text", "text": ""})
            middle = len(block["text"]) // 2
            for piece in (block["text"][:middle], block["text"][middle:]):
                event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        elif block["type"] == "tool_use":
            started = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            event("content_block_start", index=index, content_block=started)
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            event("content_block_delta", index=index, delta=delta)
        event("content_block_stop", index=index)
    totals = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    event(
        "message_delta",
        delta={"stop_reason": body["stop_reason"], "stop_sequence": None},
        usage={name: usage[name] for name in totals},
    )
    event("message_stop")
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


# ---------------------------------------------------------------------------------------------
# OpenAI Responses (the default API of openai-agents)
# ---------------------------------------------------------------------------------------------
def responses_usage(
    input_tokens: int, output_tokens: int, cached_tokens: int = 0, reasoning_tokens: int = 0
) -> dict[str, Any]:
    """A ``ResponseUsage`` body: ``input_tokens`` includes ``cached_tokens``, output includes reasoning."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }


def responses_reply(
    *,
    id: str,
    model: str,
    usage: dict[str, Any],
    text: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | None = None,
) -> Reply:
    """A completed ``response``: function_call items given as (call id, name, arguments), or a message."""
    output: list[dict[str, Any]] = []
    for number, (call_id, name, arguments) in enumerate(tool_calls or [], 1):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{id}_{number}",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
        )
    if text is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_{id}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    body = {
        "id": id,
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
    }
    return Reply(OPENAI_RESPONSES, body)


# ---------------------------------------------------------------------------------------------
# Google Gemini generateContent (google-genai, Gemini API)
# ---------------------------------------------------------------------------------------------
def gemini_usage(
    prompt_tokens: int, candidates_tokens: int, cached_tokens: int = 0, thoughts_tokens: int = 0
) -> dict[str, Any]:
    """A ``usageMetadata`` body: the prompt includes the cached content; candidates exclude thoughts."""
    usage = {
        "promptTokenCount": prompt_tokens,
        "candidatesTokenCount": candidates_tokens,
        "totalTokenCount": prompt_tokens + candidates_tokens + thoughts_tokens,
    }
    if cached_tokens:
        usage["cachedContentTokenCount"] = cached_tokens
    if thoughts_tokens:
        usage["thoughtsTokenCount"] = thoughts_tokens
    return usage


def gemini_reply(
    *,
    id: str,
    model: str,
    usage: dict[str, Any],
    text: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | None = None,
    model_version: str | None = None,
) -> Reply:
    """A ``GenerateContentResponse`` with one candidate: text, or functionCall parts (Gemini has no ids).

    ``model`` is the requested model (it is part of the path); ``model_version`` what the reply names.
    """
    parts: list[dict[str, Any]] = [
        {"functionCall": {"name": name, "args": arguments}} for _id, name, arguments in tool_calls or []
    ]
    if text is not None:
        parts.append({"text": text})
    body = {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": model_version or model,
        "responseId": id,
    }
    return Reply(GEMINI_GENERATE.format(model=model), body)


def converse_reply(
    *,
    model: str,
    input_tokens: int,
    output_tokens: int,
    cache_read: int = 0,
    cache_write: int = 0,
    text: str | None = None,
    tool_calls: list[tuple[str, str, dict]] | None = None,
) -> Reply:
    """A Bedrock Runtime ``Converse`` answer: ``inputTokens`` excludes the cache reads and writes, which
    ``totalTokens`` includes. The fake checks no request signature."""
    content: list[dict[str, Any]] = [
        {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}
        for call_id, name, arguments in tool_calls or []
    ]
    if text is not None:
        content.append({"text": text})
    body = {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if tool_calls else "end_turn",
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + cache_read + cache_write + output_tokens,
            "cacheReadInputTokens": cache_read,
            "cacheWriteInputTokens": cache_write,
        },
        "metrics": {"latencyMs": 5},
    }
    return Reply(BEDROCK_CONVERSE.format(model=quote(model, safe="")), body)
