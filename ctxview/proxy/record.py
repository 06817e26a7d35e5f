"""One forwarded exchange -> the attributes of one GenAI span (OTel conventions v1.41). No Django here.

The request is the window: its system, tool definitions and messages are written in the conventions'
latest shapes (``gen_ai.system_instructions`` as parts, ``gen_ai.input.messages`` /
``gen_ai.output.messages`` as ``{role, parts}``, ``gen_ai.tool.definitions`` as ``{type, name,
description, parameters}``), all as JSON strings. Streams are reassembled here, from the bytes the
client received. The parts are built with ingest's own functions (``ingest.families.messages``): an
Anthropic block ingest keeps whole (thinking, server tools, media) is kept whole here too. Usage follows the
conventions: ``gen_ai.usage.input_tokens`` includes the cached tokens, so Anthropic's exclusive
``input_tokens`` gets both cache figures added (conventions §6). The provider's cache diagnosis keeps the
response's own path under the provider's prefix, as ingest reads it.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from ctxview.proxy.exchange import Exchange
from ingest.families.messages import (
    block_part,
    text_part,
    tool_call_part,
    tool_call_parts,
    tool_response,
    tool_response_part,
)
from ingest.families.messages import message as otel_message

# --- Keys (OTel GenAI, v1.41) ---------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"
ERROR_TYPE = "error.type"
HTTP_STATUS = "http.response.status_code"
SERVER_ADDRESS = "server.address"
USER_AGENT = "user_agent.original"
# Anthropic's cache TTL split and cache diagnosis: no convention has them; ingest keeps both prefixes.
ANTHROPIC_USAGE_5M = "anthropic.usage.cache_creation.ephemeral_5m_input_tokens"
ANTHROPIC_USAGE_1H = "anthropic.usage.cache_creation.ephemeral_1h_input_tokens"
ANTHROPIC_CACHE_MISS = "anthropic.diagnostics.cache_miss_reason"
OPENAI_CACHE_MISS = "openai.prompt_cache_diagnostics.cache_miss_reason"
OPENAI_PREVIOUS_RESPONSE = "openai.request.previous_response_id"
# What the proxy itself noted (a response it could not read, a stream cut short).
PROXY_NOTE = "ctxview.proxy.note"

# The request parameters kept, per provider: (field in the request body, attribute).
_ANTHROPIC_PARAMS = (
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("top_k", "gen_ai.request.top_k"),
    ("stop_sequences", "gen_ai.request.stop_sequences"),
)
_OPENAI_PARAMS = (
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("max_output_tokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("seed", "gen_ai.request.seed"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("stop", "gen_ai.request.stop_sequences"),
)
_GEMINI_PARAMS = (
    ("maxOutputTokens", "gen_ai.request.max_tokens"),
    ("temperature", "gen_ai.request.temperature"),
    ("topP", "gen_ai.request.top_p"),
    ("topK", "gen_ai.request.top_k"),
    ("seed", "gen_ai.request.seed"),
    ("stopSequences", "gen_ai.request.stop_sequences"),
)

# OTel provider names (gen_ai.provider.name) of the routes.
PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "gemini": "gcp.gemini"}

# Finish reasons in the OTel output-message vocabulary; others are kept as the provider said them.
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "stop": "stop",
    "tool_use": "tool_call",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "max_tokens": "length",
    "length": "length",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
    "recitation": "content_filter",
    "prohibited_content": "content_filter",
    "blocklist": "content_filter",
    "spii": "content_filter",
    "malformed_function_call": "error",
}


@dataclass
class Reading:
    """What a request and its answer say, in the conventions' shapes."""

    model: str = ""
    streamed: bool = False
    system: list[dict] | None = None
    messages: list[dict] | None = None
    tools: list[dict] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    response_id: str = ""
    response_model: str = ""
    output: list[dict] | None = None
    finish_reasons: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # provider attributes (diagnosis, TTL split)
    notes: list[str] = field(default_factory=list)


def attributes_of(exchange: Exchange) -> dict[str, Any]:
    """The span attributes of one recorded exchange (content as JSON strings)."""
    reading = Reading()
    request = _json(decoded(exchange.request_body, exchange.request_headers.get("content-encoding", "")))
    if not isinstance(request, dict):
        reading.notes.append("the request body is not JSON: not recorded")
        request = {}
    body = None
    if exchange.response_body is None:
        reading.notes.append("the response was larger than the capture limit: not recorded")
    else:
        try:
            body = decoded(exchange.response_body, exchange.response_headers.get("content-encoding", ""))
        except ValueError as exc:
            reading.notes.append(f"the response could not be decoded: {exc}")
    content_type = exchange.response_headers.get("content-type", "")
    reader = READERS[exchange.route]
    reader(exchange, request, body, content_type, reading)

    attributes: dict[str, Any] = {
        OPERATION_NAME: "chat",
        PROVIDER_NAME: PROVIDERS[exchange.route],
        REQUEST_STREAM: reading.streamed,
        HTTP_STATUS: exchange.status,
    }
    if reading.model:
        attributes[REQUEST_MODEL] = reading.model
    if reading.response_model:
        attributes[RESPONSE_MODEL] = reading.response_model
    if reading.response_id:
        attributes[RESPONSE_ID] = reading.response_id
    if reading.finish_reasons:
        attributes[FINISH_REASONS] = [str(reason) for reason in reading.finish_reasons]
    for key, value in (
        (SYSTEM_INSTRUCTIONS, reading.system),
        (INPUT_MESSAGES, reading.messages),
        (OUTPUT_MESSAGES, reading.output),
        (TOOL_DEFINITIONS, reading.tools),
    ):
        if value is not None:
            attributes[key] = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for key, value in reading.params.items():
        if value is not None:
            attributes[key] = _attribute_value(value)
    attributes.update(reading.usage)
    attributes.update(reading.extra)
    if exchange.first_byte_ns is not None and reading.streamed:
        attributes[TIME_TO_FIRST_CHUNK] = (exchange.first_byte_ns - exchange.start_ns) / 1e9
    if exchange.error:
        attributes[ERROR_TYPE] = exchange.error
    elif exchange.status >= 400:
        attributes[ERROR_TYPE] = str(exchange.status)
    if exchange.server_address:
        attributes[SERVER_ADDRESS] = exchange.server_address
    if exchange.request_headers.get("user-agent"):
        attributes[USER_AGENT] = exchange.request_headers["user-agent"][:300]
    if reading.notes:
        attributes[PROXY_NOTE] = "; ".join(reading.notes)[:1000]
    return attributes


# --- Bytes --------------------------------------------------------------------------------------


def decoded(body: bytes, encoding: str) -> bytes:
    """A body without its Content-Encoding (gzip, deflate, zstd); ValueError for one not readable here."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(body, 16 + zlib.MAX_WBITS)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)
        if encoding == "zstd":
            try:
                import zstandard
            except ImportError as exc:
                raise ValueError("zstd needs the zstandard package") from exc
            return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except zlib.error as exc:
        raise ValueError(f"{encoding}: {exc}") from exc
    raise ValueError(f"unsupported content encoding {encoding!r}")


def _json(data: bytes | str | None) -> Any:
    if not data:
        return None
    try:
        return orjson.loads(data)  # several times faster on the many small events of a stream
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)  # what orjson refuses: NaN, integers past 64 bits, UTF-16, lone surrogates
    except ValueError:
        return None


def sse_events(data: bytes) -> list[tuple[str, str]]:
    """(event name, data) of each server-sent event in ``data`` (lines joined, comments skipped)."""
    events = []
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    for block in text.split("\n\n"):
        name, lines = "", []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field_name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field_name == "event":
                name = value
            elif field_name == "data":
                lines.append(value)
        if lines:
            events.append((name, "\n".join(lines)))
    return events


def _sse_json(data: bytes) -> list[tuple[str, dict]]:
    parsed = []
    for name, payload in sse_events(data):
        value = _json(payload)
        if isinstance(value, dict):
            parsed.append((name, value))
    return parsed


def _is_sse(content_type: str, body: bytes | None) -> bool:
    return "text/event-stream" in content_type.lower() or (body or b"").lstrip()[:6] in (b"event:", b"data: ")


def _attribute_value(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _finish(word: Any) -> str:
    text = str(word or "")
    return _FINISH.get(text.lower(), text)


def _arguments(raw: Any) -> Any:
    """Tool-call arguments as an object where they parse (conventions: "expected to be an object")."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # a stream cut short leaves partial JSON: kept as it was
    return raw


def _params(request: dict, table: tuple[tuple[str, str], ...], reading: Reading) -> None:
    for name, key in table:
        if request.get(name) is not None and key not in reading.params:
            value = request[name]
            reading.params[key] = (
                [value] if key.endswith("stop_sequences") and isinstance(value, str) else value
            )


# --- Anthropic Messages -----------------------------------------------------------------------


def _anthropic_part(block: Any) -> dict:
    """A Messages content block as ingest reads it wherever it meets one (``block_part``): text, tool use
    and tool results as parts; thinking, redacted thinking, server tools and their results, images and
    documents kept whole. One reading, so a call recorded here and the same call from an
    instrumentation make the same items (the same hashes, so the same cache prefixes)."""
    return block_part(block)


def _anthropic_system(system: Any) -> list[dict] | None:
    if system is None:
        return None
    if isinstance(system, str):
        return [text_part(system)]
    if isinstance(system, list):
        return [_anthropic_part(block) for block in system]
    return [text_part(system)]


def _anthropic_messages(messages: Any) -> list[dict] | None:
    if not isinstance(messages, list):
        return None
    converted = []
    for entry in messages:
        if not isinstance(entry, dict):
            continue
        content = entry.get("content")
        blocks = content if isinstance(content, list) else [content] if content not in (None, "") else []
        converted.append(otel_message(entry.get("role"), [_anthropic_part(block) for block in blocks]))
    return converted


def _anthropic_tools(tools: Any) -> list[dict] | None:
    if not isinstance(tools, list):
        return None
    definitions = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if "input_schema" in tool or tool.get("type") in (None, "custom"):
            definition = {"type": "function", "name": tool.get("name")}
            if tool.get("description") is not None:
                definition["description"] = tool["description"]
            if tool.get("input_schema") is not None:
                definition["parameters"] = tool["input_schema"]
        else:  # a server tool (web_search_20250305, bash_20250124...): its type and name
            definition = {"type": tool.get("type"), "name": tool.get("name") or tool.get("type")}
        definitions.append(definition)
    return definitions


def _anthropic_usage(usage: Any, reading: Reading) -> None:
    if not isinstance(usage, dict):
        return
    uncached = _count(usage.get("input_tokens"))
    read = _count(usage.get("cache_read_input_tokens"))
    written = _count(usage.get("cache_creation_input_tokens"))
    if uncached is not None:
        # Anthropic's input_tokens excludes both cache buckets; the conventions' figure includes them.
        reading.usage[INPUT_TOKENS] = uncached + (read or 0) + (written or 0)
        reading.usage[CACHE_READ] = read or 0
        reading.usage[CACHE_CREATION] = written or 0
    if _count(usage.get("output_tokens")) is not None:
        reading.usage[OUTPUT_TOKENS] = usage["output_tokens"]
    details = usage.get("output_tokens_details")
    if isinstance(details, dict) and _count(details.get("thinking_tokens")) is not None:
        reading.usage[REASONING] = details["thinking_tokens"]
    split = usage.get("cache_creation")
    if isinstance(split, dict):
        for name, key in (
            ("ephemeral_5m_input_tokens", ANTHROPIC_USAGE_5M),
            ("ephemeral_1h_input_tokens", ANTHROPIC_USAGE_1H),
        ):
            if _count(split.get(name)) is not None:
                reading.extra[key] = split[name]


def _anthropic_diagnosis(diagnostics: Any, reading: Reading) -> None:
    reason = diagnostics.get("cache_miss_reason") if isinstance(diagnostics, dict) else None
    if isinstance(reason, dict) and isinstance(reason.get("type"), str):
        reading.extra[f"{ANTHROPIC_CACHE_MISS}.type"] = reason["type"]
        if _count(reason.get("cache_missed_input_tokens")) is not None:
            reading.extra[f"{ANTHROPIC_CACHE_MISS}.cache_missed_input_tokens"] = reason[
                "cache_missed_input_tokens"
            ]


def _anthropic_stream(data: bytes) -> dict | None:
    """The ``message`` a Messages stream carries, rebuilt from its events (usage replaced, not summed)."""
    message: dict | None = None
    blocks: dict[int, dict] = {}
    partial: dict[int, str] = {}
    for _name, event in _sse_json(data):
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):
            message = dict(event["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif message is None:
            continue
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[event.get("index", len(blocks))] = dict(event["content_block"])
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict):
            index = event.get("index", 0)
            block = blocks.setdefault(index, {"type": "text", "text": ""})
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta.get("signature")
        elif kind == "message_delta":
            if isinstance(event.get("delta"), dict):
                message.update(
                    {k: v for k, v in event["delta"].items() if v is not None or k == "stop_sequence"}
                )
            if isinstance(event.get("usage"), dict):
                # Cumulative figures: each replaces the one before (conventions §6, "don't sum").
                message["usage"].update({k: v for k, v in event["usage"].items() if v is not None})
            if "diagnostics" in event:
                message["diagnostics"] = event["diagnostics"]
    if message is None:
        return None
    for index, text in partial.items():
        blocks[index]["input"] = _arguments(text) if text else {}
    message["content"] = [blocks[index] for index in sorted(blocks)]
    return message


def read_anthropic(
    exchange: Exchange, request: dict, body: bytes | None, content_type: str, reading: Reading
) -> None:
    reading.model = str(request.get("model") or "")
    reading.streamed = bool(request.get("stream"))
    reading.system = _anthropic_system(request.get("system"))
    reading.messages = _anthropic_messages(request.get("messages"))
    reading.tools = _anthropic_tools(request.get("tools"))
    _params(request, _ANTHROPIC_PARAMS, reading)
    if exchange.status >= 400 or body is None:
        return
    response = _anthropic_stream(body) if _is_sse(content_type, body) else _json(body)
    if not isinstance(response, dict):
        reading.notes.append("the response is not a Messages answer")
        return
    reading.response_id = str(response.get("id") or "")
    reading.response_model = str(response.get("model") or "")
    finish = _finish(response.get("stop_reason")) if response.get("stop_reason") else ""
    if finish:
        reading.finish_reasons = [finish]
    parts = [_anthropic_part(block) for block in response.get("content") or []]
    reading.output = [{"role": "assistant", "parts": parts, "finish_reason": finish or "stop"}]
    _anthropic_usage(response.get("usage"), reading)
    _anthropic_diagnosis(response.get("diagnostics"), reading)
    if response.get("stop_reason") is None and reading.streamed:
        reading.notes.append("the stream ended before message_delta: usage and finish reason may be partial")


# --- OpenAI Chat Completions and Responses ----------------------------------------------------


def _openai_part(part: Any) -> dict:
    if not isinstance(part, dict):
        return text_part(part)
    kind = part.get("type")
    if kind in ("text", "input_text", "output_text"):
        return text_part(part.get("text", ""))
    if kind == "refusal":
        return text_part(part.get("refusal", ""))
    if kind == "image_url":
        url = part.get("image_url")
        return {"type": "uri", "modality": "image", "uri": url.get("url") if isinstance(url, dict) else url}
    if kind == "input_image":
        if part.get("file_id"):
            return {"type": "file", "modality": "image", "file_id": part["file_id"]}
        return {"type": "uri", "modality": "image", "uri": part.get("image_url")}
    if kind == "input_audio":
        audio = part.get("input_audio") if isinstance(part.get("input_audio"), dict) else {}
        return {
            "type": "blob",
            "modality": "audio",
            "mime_type": f"audio/{audio.get('format')}",
            "content": audio.get("data"),
        }
    if kind in ("file", "input_file"):
        file = part.get("file") if isinstance(part.get("file"), dict) else part
        return {
            "type": "file",
            "modality": "document",
            "file_id": file.get("file_id"),
            "filename": file.get("filename"),
        }
    return dict(part)


def _openai_content(content: Any) -> list[dict]:
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [_openai_part(part) for part in content]
    return [text_part(content)]


def _tool_calls(calls: Any) -> list[dict]:
    """Chat Completions ``tool_calls`` as parts (ingest's ``tool_call_parts``), custom calls included,
    with the arguments parsed."""
    functions = []
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict) and call.get("type") == "custom" and isinstance(call.get("custom"), dict):
            custom = call["custom"]
            call = {
                "id": call.get("id"),
                "function": {"name": custom.get("name"), "arguments": custom.get("input")},
            }
        functions.append(call)
    return [part | {"arguments": _arguments(part["arguments"])} for part in tool_call_parts(functions)]


def _chat_messages(messages: Any) -> list[dict] | None:
    if not isinstance(messages, list):
        return None
    converted = []
    for entry in messages:
        if not isinstance(entry, dict):
            continue
        role = str(entry.get("role") or "user")
        if role in ("tool", "function"):
            parts = tool_response(entry.get("tool_call_id") or entry.get("name"), entry.get("content"))
        else:
            parts = _openai_content(entry.get("content"))
            if entry.get("refusal"):
                parts.append(text_part(entry["refusal"]))
            parts += _tool_calls(entry.get("tool_calls"))
            if isinstance(entry.get("function_call"), dict):  # the deprecated single call
                parts += _tool_calls([{"function": entry["function_call"]}])
        converted.append(otel_message(role, parts, entry.get("name") if role != "tool" else None))
    return converted


def _openai_tools(tools: Any) -> list[dict] | None:
    if not isinstance(tools, list):
        return None
    definitions = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        spec = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        if tool.get("type", "function") == "function":
            definition = {"type": "function", "name": spec.get("name")}
            if spec.get("description") is not None:
                definition["description"] = spec["description"]
            if spec.get("parameters") is not None:
                definition["parameters"] = spec["parameters"]
        else:
            # Built-in and custom tools (web_search, tool_search, custom...), kept whole and named: a
            # custom tool's description and grammar reach the model as a function's schema does (Codex's
            # apply_patch: a long description and a Lark grammar), so they belong in the window.
            custom = tool.get("custom") if isinstance(tool.get("custom"), dict) else tool
            name = custom.get("name") or tool.get("server_label") or tool["type"]
            definition = {"type": tool["type"], "name": name} | {
                key: value for key, value in tool.items() if key not in ("type", "name")
            }
        definitions.append(definition)
    return definitions


def _openai_usage(
    usage: Any, reading: Reading, prompt: str, completion: str, prompt_details: str, completion_details: str
) -> None:
    if not isinstance(usage, dict):
        return
    if _count(usage.get(prompt)) is not None:
        reading.usage[INPUT_TOKENS] = usage[prompt]  # includes cached_tokens (and cache_write_tokens)
    if _count(usage.get(completion)) is not None:
        reading.usage[OUTPUT_TOKENS] = usage[completion]
    details = usage.get(prompt_details)
    if isinstance(details, dict):
        if _count(details.get("cached_tokens")) is not None:
            reading.usage[CACHE_READ] = details["cached_tokens"]
        if _count(details.get("cache_write_tokens")) is not None:
            reading.usage[CACHE_CREATION] = details["cache_write_tokens"]
    details = usage.get(completion_details)
    if isinstance(details, dict) and _count(details.get("reasoning_tokens")) is not None:
        reading.usage[REASONING] = details["reasoning_tokens"]


def _chat_stream(data: bytes) -> dict | None:
    """The ``chat.completion`` a Chat Completions stream carries, rebuilt from its chunks."""
    response: dict | None = None
    choices: dict[int, dict] = {}
    for _name, chunk in _sse_json(data):
        if response is None:
            response = {
                k: chunk.get(k) for k in ("id", "model", "created", "system_fingerprint", "service_tier")
            }
        for key in ("model", "system_fingerprint", "service_tier"):
            if chunk.get(key):
                response[key] = chunk[key]
        if chunk.get("usage"):
            response["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            message = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant"}, "calls": {}}
            )
            delta = choice.get("delta") or {}
            for key in ("content", "refusal"):
                if delta.get(key):
                    message["message"][key] = message["message"].get(key, "") + delta[key]
            for call in delta.get("tool_calls") or []:
                slot = message["calls"].setdefault(
                    call.get("index", 0),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] += function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                message["finish_reason"] = choice["finish_reason"]
    if response is None:
        return None
    response["choices"] = []
    for index in sorted(choices):
        choice = choices[index]
        if choice["calls"]:
            choice["message"]["tool_calls"] = [choice["calls"][n] for n in sorted(choice["calls"])]
        response["choices"].append(
            {"index": index, "message": choice["message"], "finish_reason": choice.get("finish_reason")}
        )
    return response


def _read_chat(request: dict, response: Any, reading: Reading) -> None:
    reading.messages = _chat_messages(request.get("messages"))
    if not isinstance(response, dict):
        return
    outputs = []
    for choice in response.get("choices") or []:
        message = choice.get("message") or {}
        finish = _finish(choice.get("finish_reason")) if choice.get("finish_reason") else ""
        if finish:
            reading.finish_reasons.append(finish)
        parts = _openai_content(message.get("content"))
        if message.get("refusal"):
            parts.append(text_part(message["refusal"]))
        parts += _tool_calls(message.get("tool_calls"))
        outputs.append({"role": "assistant", "parts": parts, "finish_reason": finish or "stop"})
    reading.output = outputs
    _openai_usage(
        response.get("usage"),
        reading,
        "prompt_tokens",
        "completion_tokens",
        "prompt_tokens_details",
        "completion_tokens_details",
    )


def _responses_item(item: Any) -> dict:
    """One Responses input item as a message (a function call or its output is a message of its own)."""
    if isinstance(item, str):
        return {"role": "user", "parts": [text_part(item)]}
    if not isinstance(item, dict):
        return {"role": "user", "parts": [text_part(item)]}
    kind = item.get("type", "message")
    if kind == "message" or ("role" in item and kind not in ("function_call", "function_call_output")):
        return otel_message(item.get("role"), _openai_content(item.get("content")))
    if kind in ("function_call", "custom_tool_call"):
        arguments = item.get("arguments") if kind == "function_call" else item.get("input")
        part = tool_call_part(item.get("call_id"), item.get("name"), _arguments(arguments))
        return {"role": "assistant", "parts": [part]}
    if kind in ("function_call_output", "custom_tool_call_output"):
        return {"role": "tool", "parts": tool_response(item.get("call_id"), item.get("output"))}
    if kind == "reasoning":
        summary = "\n".join(s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict))
        return {"role": "assistant", "parts": [{"type": "reasoning", "content": summary}]}
    return {"role": "assistant", "parts": [dict(item)]}  # built-in tool calls and newer items, kept whole


def _read_responses(
    request: dict, response: Any, body: bytes | None, content_type: str, reading: Reading
) -> None:
    instructions = request.get("instructions")
    if isinstance(instructions, str) and instructions:
        reading.system = [text_part(instructions)]
    elif isinstance(instructions, list):
        reading.messages = [_responses_item(item) for item in instructions]
    items = request.get("input")
    messages = [
        _responses_item(item) for item in (items if isinstance(items, list) else [items] if items else [])
    ]
    reading.messages = (reading.messages or []) + messages
    if request.get("previous_response_id"):
        reading.params[OPENAI_PREVIOUS_RESPONSE] = request["previous_response_id"]
        reading.notes.append(
            "previous_response_id: the earlier turns are kept by OpenAI, not in this request"
        )
    if not isinstance(response, dict):
        return
    parts = []
    asked = False
    for item in response.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            parts += _openai_content(item.get("content"))
        else:
            converted = _responses_item(item)
            parts += converted["parts"]
            asked = asked or item.get("type") in ("function_call", "custom_tool_call")
    status = response.get("status")
    if status == "completed":
        finish = "tool_call" if asked else "stop"
    elif status == "incomplete":
        details = response.get("incomplete_details") or {}
        finish = _finish(details.get("reason") or "incomplete")
    else:
        finish = "error" if status == "failed" else str(status or "")
    if finish:
        reading.finish_reasons = [finish]
    reading.output = [{"role": "assistant", "parts": parts, "finish_reason": finish or "stop"}]
    _openai_usage(
        response.get("usage"),
        reading,
        "input_tokens",
        "output_tokens",
        "input_tokens_details",
        "output_tokens_details",
    )
    diagnostics = response.get("prompt_cache_diagnostics")
    if isinstance(diagnostics, dict) and diagnostics.get("type") not in (None, "cache_hit"):
        said = (
            diagnostics.get("reason") if diagnostics.get("type") == "cache_miss" else diagnostics.get("type")
        )
        if isinstance(said, str):
            reading.extra[f"{OPENAI_CACHE_MISS}.type"] = said
            if _count(diagnostics.get("cache_missed_tokens")) is not None:
                reading.extra[f"{OPENAI_CACHE_MISS}.cache_missed_input_tokens"] = diagnostics[
                    "cache_missed_tokens"
                ]


def _responses_stream(data: bytes) -> dict | None:
    """The final ``response`` object of a Responses stream (its completed, incomplete or failed event)."""
    final = None
    for _name, event in _sse_json(data):
        if event.get("type") in ("response.completed", "response.incomplete", "response.failed") or (
            final is None and event.get("type") == "response.created"
        ):
            final = event.get("response")
    return final if isinstance(final, dict) else None


def read_openai(
    exchange: Exchange, request: dict, body: bytes | None, content_type: str, reading: Reading
) -> None:
    reading.model = str(request.get("model") or "")
    reading.streamed = bool(request.get("stream"))
    reading.tools = _openai_tools(request.get("tools"))
    _params(request, _OPENAI_PARAMS, reading)
    responses = exchange.path.rstrip("/").endswith("/responses")
    response = None
    if exchange.status < 400 and body is not None:
        if _is_sse(content_type, body):
            response = _responses_stream(body) if responses else _chat_stream(body)
        else:
            response = _json(body)
        if not isinstance(response, dict):
            reading.notes.append("the response is not a completion")
            response = None
    if responses:
        _read_responses(request, response, body, content_type, reading)
    else:
        _read_chat(request, response, reading)
    if response is not None:
        reading.response_id = str(response.get("id") or "")
        reading.response_model = str(response.get("model") or "")


# --- Gemini generateContent -------------------------------------------------------------------

_GEMINI_ROLES = {"model": "assistant", "user": "user", "function": "tool", "tool": "tool"}


def _gemini_part(part: Any) -> dict:
    if not isinstance(part, dict):
        return text_part(part)
    if "text" in part:
        if part.get("thought"):
            return {"type": "reasoning", "content": part["text"]}
        return text_part(part["text"])
    if isinstance(part.get("functionCall"), dict):
        call = part["functionCall"]
        return tool_call_part(call.get("id"), call.get("name"), call.get("args"))
    if isinstance(part.get("functionResponse"), dict):
        answer = part["functionResponse"]
        return tool_response_part(answer.get("id") or answer.get("name"), answer.get("response"))
    if isinstance(part.get("inlineData"), dict):
        data = part["inlineData"]
        mime = str(data.get("mimeType") or "")
        return {
            "type": "blob",
            "modality": mime.split("/")[0] or "image",
            "mime_type": mime,
            "content": data.get("data"),
        }
    if isinstance(part.get("fileData"), dict):
        data = part["fileData"]
        mime = str(data.get("mimeType") or "")
        return {
            "type": "uri",
            "modality": mime.split("/")[0] or "image",
            "mime_type": mime,
            "uri": data.get("fileUri"),
        }
    return {"type": next(iter(part), "unknown"), **part}


def _gemini_content(content: Any) -> dict:
    content = content if isinstance(content, dict) else {}
    role = _GEMINI_ROLES.get(str(content.get("role") or "user"), str(content.get("role")))
    parts = [_gemini_part(part) for part in content.get("parts") or []]
    if parts and all(part["type"] == "tool_call_response" for part in parts):
        role = "tool"
    return {"role": role, "parts": parts}


def _gemini_tools(tools: Any) -> list[dict] | None:
    if not isinstance(tools, list):
        return None
    definitions = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        for name in tool:
            if name in ("functionDeclarations", "function_declarations"):
                for declaration in tool[name] or []:
                    definition = {"type": "function", "name": declaration.get("name")}
                    if declaration.get("description") is not None:
                        definition["description"] = declaration["description"]
                    schema = declaration.get("parametersJsonSchema", declaration.get("parameters"))
                    if schema is not None:
                        definition["parameters"] = schema
                    definitions.append(definition)
            else:  # googleSearch, codeExecution, urlContext...
                definitions.append({"type": name, "name": name})
    return definitions


def _gemini_stream(chunks: list[dict]) -> dict:
    """One ``GenerateContentResponse`` from the chunks of a stream: parts joined, the last usage kept."""
    merged: dict = {"candidates": []}
    candidates: dict[int, dict] = {}
    for chunk in chunks:
        for key in ("responseId", "modelVersion", "usageMetadata", "promptFeedback"):
            if chunk.get(key) is not None:
                merged[key] = chunk[key]
        for candidate in chunk.get("candidates") or []:
            index = candidate.get("index", 0)
            slot = candidates.setdefault(index, {"index": index, "content": {"role": "model", "parts": []}})
            parts = slot["content"]["parts"]
            for part in (candidate.get("content") or {}).get("parts") or []:
                last = parts[-1] if parts else None
                plain = set(part) <= {"text", "thought", "thoughtSignature"}
                if (
                    last is not None
                    and "text" in part
                    and plain
                    and set(last) <= {"text", "thought", "thoughtSignature"}
                    and bool(last.get("thought")) == bool(part.get("thought"))
                ):
                    last["text"] += part["text"]
                else:
                    parts.append(dict(part))
            if candidate.get("finishReason"):
                slot["finishReason"] = candidate["finishReason"]
    merged["candidates"] = [candidates[index] for index in sorted(candidates)]
    return merged


def read_gemini(
    exchange: Exchange, request: dict, body: bytes | None, content_type: str, reading: Reading
) -> None:
    model = exchange.path.rsplit("/models/", 1)[-1].split(":", 1)[0]
    reading.model = model
    reading.streamed = exchange.path.endswith(":streamGenerateContent")
    system = request.get("systemInstruction") or request.get("system_instruction")
    if isinstance(system, dict):
        reading.system = [_gemini_part(part) for part in system.get("parts") or []]
    elif isinstance(system, str):
        reading.system = [text_part(system)]
    contents = request.get("contents")
    if isinstance(contents, list):
        reading.messages = [_gemini_content(content) for content in contents]
    reading.tools = _gemini_tools(request.get("tools"))
    config = request.get("generationConfig") or request.get("generation_config") or {}
    if isinstance(config, dict):
        _params(config, _GEMINI_PARAMS, reading)
    if exchange.status >= 400 or body is None:
        return
    if _is_sse(content_type, body):
        response = _gemini_stream([event for _name, event in _sse_json(body)])
    else:
        parsed = _json(body)
        response = _gemini_stream(parsed) if isinstance(parsed, list) else parsed
    if not isinstance(response, dict):
        reading.notes.append("the response is not a GenerateContentResponse")
        return
    reading.response_id = str(response.get("responseId") or "")
    reading.response_model = str(response.get("modelVersion") or "")
    outputs = []
    for candidate in response.get("candidates") or []:
        finish = _finish(candidate.get("finishReason")) if candidate.get("finishReason") else ""
        if finish:
            reading.finish_reasons.append(finish)
        parts = [_gemini_part(part) for part in (candidate.get("content") or {}).get("parts") or []]
        outputs.append({"role": "assistant", "parts": parts, "finish_reason": finish or "stop"})
    reading.output = outputs
    usage = response.get("usageMetadata")
    if isinstance(usage, dict):
        # promptTokenCount includes the cached content; the API leaves figures of 0 out.
        prompt = _count(usage.get("promptTokenCount"))
        if prompt is not None:
            reading.usage[INPUT_TOKENS] = prompt
            reading.usage[CACHE_READ] = _count(usage.get("cachedContentTokenCount")) or 0
            reading.usage[CACHE_CREATION] = 0  # explicit caches are written through another API
        thoughts = _count(usage.get("thoughtsTokenCount")) or 0
        candidates = _count(usage.get("candidatesTokenCount"))
        if candidates is not None or thoughts:
            # candidatesTokenCount excludes the thoughts; the conventions' output includes them.
            reading.usage[OUTPUT_TOKENS] = (candidates or 0) + thoughts
            reading.usage[REASONING] = thoughts


READERS = {"anthropic": read_anthropic, "openai": read_openai, "gemini": read_gemini}
