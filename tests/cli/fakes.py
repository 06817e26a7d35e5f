"""Local fakes of the three provider APIs the coding-agent CLIs call, answering from a script.

Stdlib ``http.server`` on 127.0.0.1 (port 0), one server per run, speaking:

* the Anthropic Messages API, streamed as SSE (Claude Code): ``POST /v1/messages``, plus
  ``/v1/messages/count_tokens``;
* the OpenAI Responses API, streamed as SSE (Codex CLI): ``POST /v1/responses``;
* the Gemini API (Gemini CLI): ``POST /v1beta/models/{model}:generateContent`` and
  ``:streamGenerateContent?alt=sse``, plus ``:countTokens``.

A CLI sends more than the conversation (titles, classifiers, token counts, analytics), in an order that
is not ours to fix, so replies are chosen by *what* a request says, not by its position: a
:class:`Step` answers the first request whose latest user turn carries its prompt marker (or the result
of its tool call) and that offers tools. Each step is used once. Any other model request gets a short
text reply with its own usage and is recorded as a side request (``step`` is None). Every reply carries
distinct usage figures, and every request is recorded with the usage the fake reported, so the
fixtures can pin exact figures.

Content of the requests is the CLI's (untrusted); only a summary of each is kept.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.cli.capture import read_body
from tests.instrumented import fake_providers as fp

ANTHROPIC = "anthropic"
OPENAI_RESPONSES = "openai-responses"
GEMINI = "gemini"
CREATED = fp.CREATED
# Side requests (not in the script) get usage from this base plus their index, so they are distinct too.
SIDE_INPUT_BASE = 70


@dataclass(frozen=True)
class Usage:
    """Provider-neutral figures; each API renders them in its own shape (see ``*_usage`` below).

    ``uncached`` excludes both cache buckets; ``output`` includes ``reasoning``.
    """

    uncached: int
    output: int
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    reasoning: int = 0

    @property
    def input_total(self) -> int:
        return self.uncached + self.cache_read + self.cache_write


@dataclass(frozen=True)
class ToolCall:
    """The model asks for one tool call; ``call_id`` is the id the tool result must come back with."""

    name: str
    arguments: dict[str, Any]
    call_id: str


@dataclass(frozen=True)
class Step:
    """One scripted model reply: ``text`` or ``tool_call``, given when the latest user turn has
    ``prompt`` in its text or the result of the call ``after_call``."""

    name: str
    usage: Usage
    prompt: str | None = None
    after_call: str | None = None
    text: str | None = None
    tool_call: ToolCall | None = None


@dataclass
class Received:
    """A summary of one request the fake received, and what it answered."""

    index: int
    method: str
    path: str
    model: str | None = None
    messages: int = 0
    tools_sent: bool = False
    tool_count: int = 0
    stream: bool = False
    step: str | None = None
    usage: dict[str, Any] | None = None
    request_id: str | None = None
    response_id: str | None = None
    status: int = 200
    traceparent: str | None = None


@dataclass
class FakeAPI:
    """A threaded HTTP server for one provider API, replying from ``steps``."""

    api: str
    steps: list[Step]
    received: list[Received] = field(default_factory=list)
    # Each request's body as it arrived, by ``Received.index`` (kept out of the summary: the recordings
    # do not need it; the proxy test compares it with what the proxy recorded).
    bodies: dict[int, bytes] = field(default_factory=dict)
    # The API keys the requests carried (never in the summary: the recordings must not hold a key).
    keys: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._unused = list(self.steps)
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> FakeAPI:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name=f"fake-{self.api}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the fake is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def load(self, steps: list[Step]) -> None:
        """Replace the script (a scenario's steps may need the fake's address, known once started)."""
        with self._lock:
            self.steps = list(steps)
            self._unused = list(steps)

    @property
    def unused_steps(self) -> list[str]:
        with self._lock:
            return [step.name for step in self._unused]

    def script(self) -> list[dict[str, Any]]:
        """The script as data, for the fixture."""
        return [
            {
                "step": step.name,
                "when": {"prompt": step.prompt} if step.prompt else {"after_call": step.after_call},
                "reply": {"text": step.text} if step.text else {"tool_call": asdict(step.tool_call)},
                "usage": asdict(step.usage),
            }
            for step in self.steps
        ]

    def _record(self, entry: Received, body: bytes = b"") -> Received:
        with self._lock:
            entry.index = len(self.received)
            self.received.append(entry)
            self.bodies[entry.index] = body
            return entry

    def _take(self, texts: list[str], call_ids: set[str], offers_tools: bool) -> Step | None:
        """The first unused step this request answers, removed from the script."""
        if not offers_tools:
            return None
        with self._lock:
            for step in self._unused:
                by_prompt = step.prompt is not None and any(step.prompt in text for text in texts)
                by_call = step.after_call is not None and step.after_call in call_ids
                if by_prompt or by_call:
                    self._unused.remove(step)
                    return step
        return None


def side_usage(index: int) -> Usage:
    return Usage(uncached=SIDE_INPUT_BASE + index, output=3 + index % 5)


# ---------------------------------------------------------------------------------------------
# What the latest user turn says, per API
# ---------------------------------------------------------------------------------------------
def _anthropic_turn(body: dict) -> tuple[list[str], set[str]]:
    # The latest turn is everything after the last assistant message: Claude Code 2.1 sends the prompt
    # with reminders as text blocks, then a ``system`` role message describing the environment.
    texts: list[str] = []
    ids: set[str] = set()
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "assistant":
            break
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                ids.add(block.get("tool_use_id"))
    return texts, ids


def _responses_turn(body: dict) -> tuple[list[str], set[str]]:
    texts: list[str] = []
    ids: set[str] = set()
    items = body.get("input") or []
    if isinstance(items, str):
        return [items], ids
    for item in reversed(items):
        kind = item.get("type", "message")
        if kind == "function_call_output":
            ids.add(item.get("call_id"))
        elif kind == "message" and item.get("role") == "user":
            content = item.get("content")
            parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
            texts.extend(parts)
        elif kind in ("function_call", "reasoning") or item.get("role") == "assistant":
            break
    return texts, ids


def _gemini_turn(body: dict) -> tuple[list[str], set[str]]:
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    if last.get("role", "user") != "user":
        return [], set()
    texts = [part["text"] for part in last.get("parts") or [] if "text" in part]
    ids: set[str] = set()
    for part in last.get("parts") or []:
        response = part.get("functionResponse")
        if response:
            # Gemini CLI may replace the call's id with its own: the function name matches too.
            ids.update(filter(None, (response.get("id"), response.get("name"))))
    return texts, ids


# ---------------------------------------------------------------------------------------------
# Replies, per API
# ---------------------------------------------------------------------------------------------
def anthropic_usage(usage: Usage) -> dict[str, Any]:
    return fp.anthropic_usage(
        usage.uncached,
        usage.output,
        cache_creation_input_tokens=usage.cache_write,
        cache_read_input_tokens=usage.cache_read,
        ephemeral_1h_input_tokens=usage.cache_write_1h,
    )


def responses_usage(usage: Usage) -> dict[str, Any]:
    """Responses API usage: ``input_tokens`` includes the cached and the cache-written tokens."""
    return {
        "input_tokens": usage.input_total,
        "input_tokens_details": {"cached_tokens": usage.cache_read, "cache_write_tokens": usage.cache_write},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.input_total + usage.output,
    }


def gemini_usage(usage: Usage) -> dict[str, Any]:
    """Gemini usage: the prompt count includes cached content; candidates exclude thoughts."""
    prompt = usage.uncached + usage.cache_read
    return {
        "promptTokenCount": prompt,
        "cachedContentTokenCount": usage.cache_read,
        "candidatesTokenCount": usage.output - usage.reasoning,
        "thoughtsTokenCount": usage.reasoning,
        "totalTokenCount": prompt + usage.output,
    }


def responses_sse(response: dict[str, Any]) -> bytes:
    """A Responses API stream: created, each output item added/done (text as one delta), completed."""
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "response": response | {"status": "in_progress", "output": [], "usage": None},
        }
    ]
    for index, item in enumerate(response["output"]):
        started = item | {"status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        events.append({"type": "response.output_item.added", "output_index": index, "item": started})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_text.delta",
                    "output_index": index,
                    "content_index": 0,
                    "item_id": item["id"],
                    "delta": text,
                }
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    lines = []
    for number, event in enumerate(events):
        event["sequence_number"] = number
        lines.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return "".join(lines).encode()


class _Handler(BaseHTTPRequestHandler):
    api: FakeAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # the recorder prints its own summary
        pass

    def do_GET(self) -> None:
        entry = self.api._record(Received(-1, "GET", self.path, status=404))
        entry.traceparent = self.headers.get("traceparent")
        self._json(404, {"error": {"type": "not_found", "message": f"the fake has no GET {self.path}"}})

    def do_POST(self) -> None:
        raw = read_body(self)
        path, _, query = self.path.partition("?")
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        entry = self.api._record(Received(-1, "POST", self.path), raw)
        bearer = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        self.api.keys.update(filter(None, (self.headers.get("x-api-key"), bearer)))
        entry.traceparent = self.headers.get("traceparent")
        entry.request_id = f"req_fake_{entry.index:03d}"
        if self.api.api == ANTHROPIC and path.endswith("/messages"):
            self._anthropic(entry, body)
        elif self.api.api == OPENAI_RESPONSES and path.endswith("/responses"):
            self._responses(entry, body)
        elif self.api.api == GEMINI and (":generateContent" in path or ":streamGenerateContent" in path):
            self._gemini(entry, body, path, stream="alt=sse" in query)
        elif path.endswith("/count_tokens") or path.endswith(":countTokens"):
            self._json(200, {"input_tokens": 11, "totalTokens": 11})
        else:
            # Analytics and other bookkeeping calls: acknowledged, recorded, not part of the conversation.
            self._json(200, {})

    # --- Anthropic Messages -----------------------------------------------------------------------
    def _anthropic(self, entry: Received, body: dict) -> None:
        texts, ids = _anthropic_turn(body)
        tools = body.get("tools") or []
        step = self.api._take(texts, ids, bool(tools))
        usage = step.usage if step else side_usage(entry.index)
        self._describe(entry, body.get("model"), len(body.get("messages") or []), tools, step, body)
        entry.usage = anthropic_usage(usage)
        entry.response_id = f"msg_fake_{entry.index:03d}"
        call = step.tool_call if step else None
        reply = fp.anthropic_reply(
            id=entry.response_id,
            model=body.get("model") or "claude-fake",
            usage=entry.usage,
            text=(step.text if step else "OK.") if not call else None,
            tool_uses=[(call.call_id, call.name, call.arguments)] if call else None,
        )
        if entry.stream:
            self._send(200, fp.anthropic_sse(reply.body), "text/event-stream; charset=utf-8", entry)
        else:
            self._send(200, json.dumps(reply.body).encode(), "application/json", entry)

    # --- OpenAI Responses -------------------------------------------------------------------------
    def _responses(self, entry: Received, body: dict) -> None:
        texts, ids = _responses_turn(body)
        tools = body.get("tools") or []
        step = self.api._take(texts, ids, bool(tools))
        usage = step.usage if step else side_usage(entry.index)
        items = body.get("input")
        self._describe(
            entry, body.get("model"), len(items) if isinstance(items, list) else 1, tools, step, body
        )
        entry.usage = responses_usage(usage)
        entry.response_id = f"resp_fake_{entry.index:03d}"
        call = step.tool_call if step else None
        if call:
            item = {
                "type": "function_call",
                "id": f"fc_fake_{entry.index:03d}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
        else:
            text = step.text if step else "OK."
            item = {
                "type": "message",
                "id": f"msg_fake_{entry.index:03d}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        response = {
            "id": entry.response_id,
            "object": "response",
            "created_at": CREATED,
            "status": "completed",
            "model": body.get("model"),
            "output": [item],
            "usage": entry.usage,
        }
        if entry.stream:
            self._send(200, responses_sse(response), "text/event-stream", entry)
        else:
            self._send(200, json.dumps(response).encode(), "application/json", entry)

    # --- Gemini -----------------------------------------------------------------------------------
    def _gemini(self, entry: Received, body: dict, path: str, stream: bool) -> None:
        texts, ids = _gemini_turn(body)
        tools = [d for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
        step = self.api._take(texts, ids, bool(tools))
        usage = step.usage if step else side_usage(entry.index)
        model = path.rsplit("/", 1)[-1].split(":", 1)[0]
        self._describe(entry, model, len(body.get("contents") or []), tools, step, body)
        entry.stream = stream
        entry.usage = gemini_usage(usage)
        entry.response_id = f"resp_fake_{entry.index:03d}"
        call = step.tool_call if step else None
        if call:
            part = {"functionCall": {"id": call.call_id, "name": call.name, "args": call.arguments}}
        else:
            part = {"text": step.text if step else _gemini_side_text(body)}
        response = {
            "candidates": [
                {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": entry.usage,
            "modelVersion": model,
            "responseId": entry.response_id,
        }
        if stream:
            self._send(200, f"data: {json.dumps(response)}\r\n\r\n".encode(), "text/event-stream", entry)
        else:
            self._send(200, json.dumps(response).encode(), "application/json", entry)

    # --- plumbing ---------------------------------------------------------------------------------
    def _describe(self, entry: Received, model, messages: int, tools: list, step: Step | None, body) -> None:
        entry.model = model
        entry.messages = messages
        entry.tools_sent = bool(tools)
        entry.tool_count = len(tools)
        entry.stream = bool(body.get("stream"))
        entry.step = step.name if step else None

    def _json(self, status: int, payload: dict) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json", None)

    def _send(self, status: int, payload: bytes, content_type: str, entry: Received | None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        if entry is not None and entry.request_id:
            # Anthropic's and OpenAI's request id headers; Claude Code logs the first as request_id.
            self.send_header("request-id", entry.request_id)
            self.send_header("x-request-id", entry.request_id)
        self.end_headers()
        self.wfile.write(payload)


def _gemini_side_text(body: dict) -> str:
    """Gemini CLI's helper calls (routing, next-speaker checks) expect JSON when they ask for it."""
    config = body.get("generationConfig") or {}
    if "json" in str(config.get("responseMimeType", "")):
        return "{}"
    return "OK."
