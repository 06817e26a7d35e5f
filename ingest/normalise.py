"""Spans of any GenAI instrumentation family -> one call record each. No Django here.

Be liberal in what is accepted: content may be a JSON string or an OTLP structured value, flattened
into indexed keys (OpenInference, legacy OpenLLMetry), or carried by span events or log records.
Everything is normalised to the OTel message shape ``{"role", "parts": [...]}`` and then to the
call's ordered items, in provider render order: tools, system, messages.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ctxcore.vocabulary import CONTENT_LIMIT, Item, Usage, digest, render
from ingest import manifest as manifest_module
from ingest import otlp, semconv, tokens
from ingest.usage import normalise_usage, provider_name

MODEL_CALL = "model_call"
TOOL = "tool"
AGENT = "agent"

# Attribute keys (and prefixes of flattened keys) that carry content; moved out of the stored span once
# they are represented as items, so a long run does not store its history once per call.
CONTENT_KEYS = (
    semconv.INPUT_MESSAGES,
    semconv.OUTPUT_MESSAGES,
    semconv.SYSTEM_INSTRUCTIONS,
    semconv.TOOL_DEFINITIONS,
    semconv.CTXVIEW_MANIFEST,
)
CONTENT_PREFIXES = (
    semconv.LEGACY_PROMPT + ".",
    semconv.LEGACY_COMPLETION + ".",
    semconv.OPENINFERENCE_INPUT_MESSAGES + ".",
    semconv.OPENINFERENCE_OUTPUT_MESSAGES + ".",
    semconv.OPENINFERENCE_TOOLS + ".",
    semconv.LEGACY_FUNCTIONS + ".",
)


@dataclass(frozen=True)
class Event:
    """A content event tied to a span: a span event or a log record."""

    name: str
    attributes: dict
    body: Any = None


@dataclass(frozen=True)
class CallRecord:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    run_key: str
    run_key_source: str
    service: str
    agent_name: str
    provider: str
    operation: str
    request_model: str
    response_model: str
    response_id: str
    usage: Usage
    turn_hint: int | None
    user_fingerprint: str | None
    content_captured: bool
    manifest_source: str  # explicit | derived | none
    manifest_error: str
    items: tuple[Item, ...]
    excluded: tuple[dict, ...]
    budget: dict | None
    prompt_version: str
    tool_calls: tuple[dict, ...]
    tool_definitions: tuple[str, ...] | None
    finish_reasons: tuple[str, ...]
    notes: tuple[str, ...]
    moved_keys: tuple[str, ...] = field(default=())

    @property
    def model(self) -> str:
        return self.response_model or self.request_model


# --- Small helpers -------------------------------------------------------------------------------


def _first_text(attributes: dict, keys: Iterable[str]) -> tuple[str, str]:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip(), key
    return "", ""


def _json(value: Any) -> Any:
    """A JSON string parsed, anything else as is; unparseable strings stay strings."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped[:1] in ("[", "{", '"'):
            try:
                return otlp.json_value(value)
            except ValueError:
                return value
    return value


def nest(attributes: dict, prefix: str) -> dict:
    """Flattened keys (``prefix.0.message.role``) as nested dicts (``{"0": {"message": {"role": …}}}``)."""
    root: dict = {}
    start = len(prefix) + 1
    for key, value in attributes.items():
        if not key.startswith(prefix + "."):
            continue
        node = root
        parts = key[start:].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[parts[-1]] = value
    return root


def _is_number(text: str, max_digits: int) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= max_digits


def _indexed(mapping: Any) -> list:
    """Values of a dict keyed by "0", "1", … in index order."""
    if not isinstance(mapping, dict):
        return []
    # isdigit() alone accepts "²", which int() refuses; indexes past 9 digits are not real either.
    keys = sorted((key for key in mapping if _is_number(key, 9)), key=int)
    return [mapping[key] for key in keys]


# --- Classification ------------------------------------------------------------------------------


def classify(name: str, attributes: dict) -> str | None:
    """model_call, tool, agent, or None for spans ctxview does not interpret."""
    operation = str(attributes.get(semconv.OPERATION_NAME) or "").lower()
    openinference_kind = str(attributes.get(semconv.OPENINFERENCE_SPAN_KIND) or "").upper()
    traceloop_kind = str(attributes.get(semconv.TRACELOOP_SPAN_KIND) or "").lower()
    if operation in semconv.MODEL_CALL_OPERATIONS or openinference_kind == semconv.OPENINFERENCE_LLM:
        return MODEL_CALL
    if operation in semconv.TOOL_OPERATIONS or openinference_kind == semconv.OPENINFERENCE_TOOL:
        return TOOL
    if operation in semconv.AGENT_OPERATIONS or openinference_kind == semconv.OPENINFERENCE_AGENT:
        return AGENT
    if operation:
        return None
    request_type = str(attributes.get(semconv.LEGACY_REQUEST_TYPE) or "").lower()
    if request_type in semconv.LEGACY_MODEL_CALL_REQUEST_TYPES:
        return MODEL_CALL
    if traceloop_kind == semconv.TRACELOOP_TOOL:
        return TOOL
    if traceloop_kind in semconv.TRACELOOP_AGENT_KINDS or name == semconv.PYDANTIC_AI_LEGACY_AGENT_SPAN:
        return AGENT
    return None


def run_key(attributes: dict, trace_id: str) -> tuple[str, str]:
    """The run a call belongs to and where that key came from; the trace id when nothing names one."""
    value, key = _first_text(attributes, semconv.RUN_KEYS)
    if value:
        return value[:200], key
    return trace_id, "trace_id"


# --- Message parts -------------------------------------------------------------------------------


def _block_part(block: Any) -> dict:
    """One content block of any provider's shape as an OTel message part."""
    if isinstance(block, str):
        return {"type": "text", "content": block}
    if not isinstance(block, dict):
        return {"type": "text", "content": render(block)}
    kind = block.get("type")
    if kind == "text":
        text = block.get("content", block.get("text", ""))
        return {"type": "text", "content": text if isinstance(text, str) else render(text)}
    if kind in ("tool_use", "function_call"):
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        return {
            "type": "tool_call_response",
            "id": block.get("tool_use_id"),
            "response": block.get("content"),
        }
    if kind == "tool_call_response" and "response" not in block and "result" in block:
        # The registry's example says "result"; the schema says "response".
        return {"type": "tool_call_response", "id": block.get("id"), "response": block.get("result")}
    return block


def _parts(content: Any) -> list[dict]:
    content = _json(content) if isinstance(content, str) and content.lstrip()[:1] == "[" else content
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [_block_part(block) for block in content]
    return [_block_part(content)]


def _tool_call_parts(tool_calls: Any) -> list[dict]:
    """OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}``) or flattened ones, as parts."""
    calls = tool_calls if isinstance(tool_calls, list) else _indexed(tool_calls)
    parts = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        call = call.get("tool_call", call)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name", call.get("name")),
                "arguments": function.get("arguments", call.get("arguments")),
            }
        )
    return parts


def _message(role: Any, parts: list[dict], name: Any = None) -> dict:
    message = {"role": str(role or "user").lower(), "parts": parts}
    if name:
        message["name"] = name
    return message


def _otel_messages(value: Any) -> list[dict] | None:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (also tolerating ``content`` for ``parts``)."""
    value = _json(value)
    if not isinstance(value, list):
        return None
    messages = []
    for entry in value:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("parts"), list):
            parts = [_block_part(part) for part in entry["parts"]]
        else:
            parts = _parts(entry.get("content")) + _tool_call_parts(entry.get("tool_calls") or [])
            if entry.get("tool_call_id") or (entry.get("id") and entry.get("role") == "tool"):
                parts = [
                    {
                        "type": "tool_call_response",
                        "id": entry.get("tool_call_id") or entry.get("id"),
                        "response": entry.get("content"),
                    }
                ]
        messages.append(_message(entry.get("role"), parts, entry.get("name")))
    return messages


def _openinference_messages(attributes: dict, prefix: str) -> list[dict] | None:
    entries = _indexed(nest(attributes, prefix))
    if not entries:
        return None
    messages = []
    for entry in entries:
        message = entry.get("message", {}) if isinstance(entry, dict) else {}
        parts = []
        for content in _indexed(message.get("contents")):
            block = content.get("message_content", {}) if isinstance(content, dict) else {}
            kind = block.get("type", "text")
            if kind == "text":
                parts.append({"type": "text", "content": block.get("text", "")})
            else:
                parts.append({"type": kind, **{k: v for k, v in block.items() if k != "type"}})
        if "content" in message:
            parts = _parts(message["content"]) + parts
        parts += _tool_call_parts(message.get("tool_calls"))
        if message.get("tool_call_id"):
            # OpenInference keeps a tool result's text in message.content with its call id beside it.
            texts = [part.get("content") for part in parts if part.get("type") == "text"]
            parts = [
                {"type": "tool_call_response", "id": message["tool_call_id"], "response": "".join(texts)}
            ]
        messages.append(_message(message.get("role"), parts, message.get("name")))
    return messages


def _legacy_openllmetry_messages(attributes: dict, prefix: str) -> list[dict] | None:
    entries = _indexed(nest(attributes, prefix))
    if not entries:
        return None
    messages = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        parts = _parts(entry.get("content"))
        parts += _tool_call_parts(entry.get("tool_calls"))
        if entry.get("tool_call_id"):
            parts = [
                {"type": "tool_call_response", "id": entry["tool_call_id"], "response": entry.get("content")}
            ]
        messages.append(_message(entry.get("role"), parts))
    return messages


def _event_messages(events: list[Event]) -> tuple[list[dict] | None, list[dict] | None]:
    """Input and output messages from the deprecated per-message events (v1.28–v1.36)."""
    inputs: list[dict] = []
    outputs: list[dict] = []
    for event in events:
        body = _json(event.body) if event.body is not None else event.attributes
        body = body if isinstance(body, dict) else {"content": body}
        if event.name in semconv.EVENT_MESSAGE_ROLES:
            role = body.get("role") or semconv.EVENT_MESSAGE_ROLES[event.name]
            parts = _parts(body.get("content")) + _tool_call_parts(body.get("tool_calls") or [])
            if event.name == "gen_ai.tool.message":
                parts = [
                    {"type": "tool_call_response", "id": body.get("id"), "response": body.get("content")}
                ]
            inputs.append(_message(role, parts))
        elif event.name == semconv.EVENT_CHOICE:
            message = body.get("message") if isinstance(body.get("message"), dict) else {}
            parts = _parts(message.get("content")) + _tool_call_parts(
                body.get("tool_calls") or message.get("tool_calls") or []
            )
            outputs.append(_message(message.get("role") or "assistant", parts))
    return inputs or None, outputs or None


def _content_attributes(attributes: dict, events: list[Event]) -> dict:
    """Content keys from the span, completed from events (details events, legacy span events)."""
    merged = {key: attributes[key] for key in CONTENT_KEYS if key in attributes}
    for event in events:
        if event.name == semconv.EVENT_OPERATION_DETAILS:
            for source in (
                event.attributes,
                _json(event.body) if isinstance(event.body, (str, dict)) else None,
            ):
                if isinstance(source, dict):
                    for key in CONTENT_KEYS:
                        if key in source:
                            merged.setdefault(key, source[key])
        elif event.name == semconv.EVENT_CONTENT_PROMPT and semconv.LEGACY_PROMPT in event.attributes:
            merged.setdefault(semconv.INPUT_MESSAGES, event.attributes[semconv.LEGACY_PROMPT])
        elif event.name == semconv.EVENT_CONTENT_COMPLETION and semconv.LEGACY_COMPLETION in event.attributes:
            merged.setdefault(semconv.OUTPUT_MESSAGES, event.attributes[semconv.LEGACY_COMPLETION])
    return merged


def input_messages(
    attributes: dict, content: dict, events: list[Event]
) -> tuple[list[dict] | None, list[str]]:
    """The input messages and the attribute keys they were read from (None: content not captured).

    ``content`` is ``_content_attributes(attributes, events)``, worked out once per call."""
    if semconv.INPUT_MESSAGES in content:
        messages = _otel_messages(content[semconv.INPUT_MESSAGES])
        if messages is not None:
            return messages, [semconv.INPUT_MESSAGES]
        if isinstance(content[semconv.INPUT_MESSAGES], str):  # v1.26: a plain prompt string
            return [_message("user", _parts(content[semconv.INPUT_MESSAGES]))], [semconv.INPUT_MESSAGES]
    messages = _openinference_messages(attributes, semconv.OPENINFERENCE_INPUT_MESSAGES)
    if messages is not None:
        return messages, [semconv.OPENINFERENCE_INPUT_MESSAGES + "."]
    messages = _legacy_openllmetry_messages(attributes, semconv.LEGACY_PROMPT)
    if messages is not None:
        return messages, [semconv.LEGACY_PROMPT + "."]
    messages, _ = _event_messages(events)
    return messages, []


def output_messages(
    attributes: dict, content: dict, events: list[Event]
) -> tuple[list[dict] | None, list[str]]:
    if semconv.OUTPUT_MESSAGES in content:
        messages = _otel_messages(content[semconv.OUTPUT_MESSAGES])
        if messages is not None:
            return messages, [semconv.OUTPUT_MESSAGES]
    messages = _openinference_messages(attributes, semconv.OPENINFERENCE_OUTPUT_MESSAGES)
    if messages is not None:
        return messages, [semconv.OPENINFERENCE_OUTPUT_MESSAGES + "."]
    messages = _legacy_openllmetry_messages(attributes, semconv.LEGACY_COMPLETION)
    if messages is not None:
        return messages, [semconv.LEGACY_COMPLETION + "."]
    _, messages = _event_messages(events)
    return messages, []


def system_parts(content: dict) -> tuple[list[dict] | None, list[str]]:
    value = _json(content.get(semconv.SYSTEM_INSTRUCTIONS))
    if value is None or value == "":
        return None, []
    if isinstance(value, str):
        return [{"type": "text", "content": value}], [semconv.SYSTEM_INSTRUCTIONS]
    if isinstance(value, dict):
        value = [value]
    return [_block_part(part) for part in value], [semconv.SYSTEM_INSTRUCTIONS]


def tool_definitions(attributes: dict, content: dict) -> tuple[list[dict] | None, list[str]]:
    """Tool definitions in whatever shape the family sends them (OTel, OpenAI, Anthropic, flattened)."""
    value = _json(content.get(semconv.TOOL_DEFINITIONS))
    if isinstance(value, list):
        return [tool for entry in value if isinstance(tool := _json(entry), dict)], [semconv.TOOL_DEFINITIONS]
    tools = [
        schema
        for entry in _indexed(nest(attributes, semconv.OPENINFERENCE_TOOLS))
        if isinstance(entry, dict)
        and isinstance(schema := _json((entry.get("tool") or {}).get("json_schema")), dict)
    ]
    if tools:
        return tools, [semconv.OPENINFERENCE_TOOLS + "."]
    functions = [
        entry for entry in _indexed(nest(attributes, semconv.LEGACY_FUNCTIONS)) if isinstance(entry, dict)
    ]
    if functions:
        return [{key: _json(value) for key, value in entry.items()} for entry in functions], [
            semconv.LEGACY_FUNCTIONS + "."
        ]
    parameters = _json(attributes.get(semconv.PYDANTIC_AI_REQUEST_PARAMETERS))
    if isinstance(parameters, dict) and isinstance(parameters.get("function_tools"), list):
        return [tool for tool in parameters["function_tools"] if isinstance(tool, dict)], []
    return None, []


def tool_name(definition: dict) -> str:
    function = definition.get("function")
    if isinstance(function, dict) and function.get("name"):
        return str(function["name"])
    return str(definition.get("name") or "")


# --- Items ---------------------------------------------------------------------------------------


def _is_tool_result(message: dict) -> bool:
    parts = message["parts"]
    return message["role"] == "tool" or (
        bool(parts) and all(p.get("type") == "tool_call_response" for p in parts)
    )


def _token_text(message: dict) -> str:
    """What a message costs in tokens: its texts, tool names and arguments, tool results."""
    pieces = []
    for part in message["parts"]:
        kind = part.get("type")
        if kind in ("text", "reasoning"):
            pieces.append(render(part.get("content") or ""))
        elif kind == "tool_call":
            pieces.append(render(part.get("name") or ""))
            pieces.append(render(part.get("arguments") or ""))
        elif kind == "tool_call_response":
            pieces.append(render(part.get("response") or ""))
        else:
            pieces.append(render(part))
    return "\n".join(pieces)


TokenCounter = Callable[[str, str], int]


def _count_tokens(content_hash: str, text: str) -> int:
    return tokens.count(text)


def derive_items(
    tools: list[dict] | None,
    system: list[dict] | None,
    messages: list[dict] | None,
    count: TokenCounter = _count_tokens,
) -> list[Item]:
    """The call's items in render order; ids stay the same for the same tool, system part or message."""
    items: list[Item] = []
    seen: dict[str, int] = {}

    def add(
        item_id: str,
        kind: str,
        bucket: str,
        role: str | None,
        trust: str | None,
        text: str,
        token_text: str,
        overhead: int = 0,
    ) -> None:
        seen[item_id] = seen.get(item_id, 0) + 1
        if seen[item_id] > 1:
            item_id = f"{item_id}#{seen[item_id]}"
        content_hash = digest(text)
        items.append(
            Item(
                id=item_id,
                kind=kind,
                bucket=bucket,
                role=role,
                position=len(items),
                tokens=count(content_hash, token_text) + overhead,
                hash=content_hash,
                trust=trust,
                content=text[:CONTENT_LIMIT],
                content_truncated=len(text) > CONTENT_LIMIT,
            )
        )

    for tool in tools or []:
        text = render(tool)
        add(f"tool:{tool_name(tool) or digest(text)[:12]}", "tool", "tools", None, "system", text, text)
    for index, part in enumerate(system or []):
        text = part.get("content") if part.get("type") == "text" else render(part)
        text = text if isinstance(text, str) else render(text)
        add(f"system:{index}", "system", "system", "system", "system", text, text)
    for message in messages or []:
        text = render(message)
        role = message["role"]
        if role in ("system", "developer"):
            kind, bucket, trust = "system", "system", "system"
        elif _is_tool_result(message):
            kind, bucket, trust = "tool_result", "tool_results", "tool"
        else:
            kind, bucket, trust = "message", "conversation", "user" if role == "user" else None
        add(
            f"msg:{digest(text)[:12]}",
            kind,
            bucket,
            role,
            trust,
            text,
            _token_text(message),
            tokens.MESSAGE_OVERHEAD,
        )
    return items


def user_fingerprint(messages: list[dict] | None) -> str | None:
    """Hash of the last user message that is not only tool results: a new one starts a new turn."""
    for message in reversed(messages or []):
        if message["role"] == "user" and not _is_tool_result(message):
            return digest(render(message))
    return None


def tool_calls_of(messages: list[dict] | None) -> list[dict]:
    return [
        {"name": part.get("name"), "id": part.get("id")}
        for message in messages or []
        for part in message["parts"]
        if part.get("type") == "tool_call"
    ]


# --- The call record -----------------------------------------------------------------------------


def _finish_reasons(attributes: dict) -> tuple[str, ...]:
    for key in semconv.FINISH_REASONS:
        value = _json(attributes.get(key))
        if isinstance(value, list):
            return tuple(str(reason) for reason in value)
        if isinstance(value, str) and value:
            return (value,)
    return ()


MAX_TURN = 2**31 - 1  # the column's range


def _turn_hint(attributes: dict) -> int | None:
    value = attributes.get(semconv.CTXVIEW_TURN)
    if isinstance(value, str) and _is_number(value, 10):
        value = int(value)
    valid = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TURN
    return value if valid else None


def call_record(
    span: dict,
    resource: dict,
    events: list[Event] = (),  # type: ignore[assignment]
    count: TokenCounter = _count_tokens,
) -> CallRecord:
    """Interpret one model-call span (a row from ``otlp.spans``) with the content events tied to it."""
    attributes = span["attributes"]
    events = [Event(event["name"], event["attributes"]) for event in span.get("events", [])] + list(events)
    key, key_source = run_key(attributes, span["trace_id"])
    provider = provider_name(_first_text(attributes, semconv.PROVIDER)[0])
    usage = normalise_usage(attributes, provider, span.get("scope_name", ""), span.get("scope_version", ""))
    notes = list(usage.notes)

    # Details events may carry the whole conversation as one JSON body: parse it once, not per reader.
    content = _content_attributes(attributes, events)
    tools, tool_keys = tool_definitions(attributes, content)
    system, system_keys = system_parts(content)
    inputs, input_keys = input_messages(attributes, content, events)
    outputs, output_keys = output_messages(attributes, content, events)
    content_captured = inputs is not None or system is not None
    # Only what the span itself carried is moved out of it; content from events stays where it was.
    moved = [
        key
        for key in tool_keys + system_keys + input_keys + output_keys
        if key in attributes or (key.endswith(".") and any(name.startswith(key) for name in attributes))
    ]

    items = derive_items(tools, system, inputs, count)
    manifest_source = "derived" if content_captured or tools else "none"
    excluded: tuple[dict, ...] = ()
    budget = None
    prompt_version = ""
    manifest_error = ""
    raw_manifest = attributes.get(semconv.CTXVIEW_MANIFEST)
    if raw_manifest is not None:
        try:
            manifest = manifest_module.parse(raw_manifest)
        except manifest_module.ManifestError as exc:
            manifest_error = str(exc)
            notes.append(f"the ctxview.manifest was not used: {exc}")
        else:
            items = list(manifest.items)
            if tools is None:
                # The catalogue the sender declared: its tool items ("tool:<name>" by the SDK's convention).
                tools = [{"name": item.id.removeprefix("tool:")} for item in items if item.bucket == "tools"]
            excluded = manifest.excluded
            budget = manifest.budget
            prompt_version = manifest.prompt_version
            manifest_source = "explicit"
            manifest_error = "; ".join(manifest.warnings)
            content_captured = content_captured or any(item.content is not None for item in items)
            moved.append(semconv.CTXVIEW_MANIFEST)
    if not content_captured and manifest_source != "explicit":
        notes.append("content was not captured: enable message content capture in the instrumentation")

    return CallRecord(
        trace_id=span["trace_id"],
        span_id=span["span_id"],
        parent_span_id=span.get("parent_span_id", ""),
        name=span.get("name", ""),
        start_ns=span["start_time_unix_nano"],
        end_ns=span["end_time_unix_nano"],
        run_key=key,
        run_key_source=key_source,
        service=str(resource.get(semconv.SERVICE_NAME, "")),
        agent_name=_first_text(attributes, semconv.AGENT_NAME)[0][:200],
        provider=provider[:100],
        operation=str(attributes.get(semconv.OPERATION_NAME) or "chat")[:50],
        request_model=_first_text(attributes, semconv.REQUEST_MODEL)[0][:200],
        response_model=_first_text(attributes, semconv.RESPONSE_MODEL)[0][:200],
        response_id=_first_text(attributes, semconv.RESPONSE_ID)[0][:200],
        usage=usage,
        turn_hint=_turn_hint(attributes),
        user_fingerprint=user_fingerprint(inputs),
        content_captured=content_captured,
        manifest_source=manifest_source,
        manifest_error=manifest_error[:1000],
        items=tuple(items),
        excluded=excluded,
        budget=budget,
        prompt_version=prompt_version[:200],
        tool_calls=tuple(tool_calls_of(outputs)),
        tool_definitions=tuple(tool_name(tool) for tool in tools) if tools is not None else None,
        finish_reasons=_finish_reasons(attributes),
        notes=tuple(notes),
        moved_keys=tuple(dict.fromkeys(moved)),
    )


def without_content(attributes: dict, moved_keys: Iterable[str]) -> dict:
    """The span's attributes minus the content now kept as items, with a note of what was moved."""
    moved_keys = tuple(moved_keys)
    if not moved_keys:
        return attributes
    exact = {key for key in moved_keys if not key.endswith(".")}
    prefixes = tuple(key for key in moved_keys if key.endswith("."))
    kept = {
        key: value for key, value in attributes.items() if key not in exact and not key.startswith(prefixes)
    }
    kept["ctxview.content_moved"] = list(moved_keys)
    return kept


# Everything else that carries prompt or tool content, for hash-only projects.
# (TOOL_CALL_ARGUMENTS and TOOL_CALL_RESULT include input.value, output.value and traceloop.entity.*.)
OTHER_CONTENT_KEYS = (
    "pydantic_ai.all_messages",
    semconv.LEGACY_PROMPT,
    semconv.LEGACY_COMPLETION,
    *semconv.TOOL_CALL_ARGUMENTS,
    *semconv.TOOL_CALL_RESULT,
)
OTHER_CONTENT_PREFIXES = ("llm.prompts.", "llm.choices.")
_ALL_CONTENT_KEYS = frozenset(CONTENT_KEYS + OTHER_CONTENT_KEYS)
_ALL_CONTENT_PREFIXES = CONTENT_PREFIXES + OTHER_CONTENT_PREFIXES
CONTENT_EVENTS = frozenset(
    {
        semconv.EVENT_CONTENT_PROMPT,
        semconv.EVENT_CONTENT_COMPLETION,
        semconv.EVENT_OPERATION_DETAILS,
        semconv.EVENT_CHOICE,
        *semconv.EVENT_MESSAGE_ROLES,
    }
)


def without_any_content(row: dict) -> dict:
    """A span row with every known content attribute and content event emptied (hash-only projects)."""
    attributes = {
        key: value
        for key, value in row["attributes"].items()
        if key not in _ALL_CONTENT_KEYS and not key.startswith(_ALL_CONTENT_PREFIXES)
    }
    if len(attributes) != len(row["attributes"]):
        attributes["ctxview.content_dropped"] = True
    events = [
        {**event, "attributes": {"ctxview.content_dropped": True}}
        if event["name"] in CONTENT_EVENTS
        else event
        for event in row.get("events", [])
    ]
    return {**row, "attributes": attributes, "events": events}


def operation_record(span: dict, kind: str) -> dict:
    """A tool execution or agent invocation: what ran, with the sizes of what went in and out."""
    attributes = span["attributes"]
    name, _ = _first_text(attributes, semconv.TOOL_NAME if kind == TOOL else semconv.AGENT_NAME)
    arguments = next((attributes[key] for key in semconv.TOOL_CALL_ARGUMENTS if key in attributes), None)
    result = next((attributes[key] for key in semconv.TOOL_CALL_RESULT if key in attributes), None)
    return {
        "kind": kind,
        "trace_id": span["trace_id"],
        "span_id": span["span_id"],
        "parent_span_id": span.get("parent_span_id", ""),
        "name": (name or span.get("name", ""))[:200],
        "call_id": _first_text(attributes, semconv.TOOL_CALL_ID)[0][:200] if kind == TOOL else "",
        "arguments_bytes": len(render(arguments).encode()) if arguments is not None else None,
        "result_bytes": len(render(result).encode()) if result is not None else None,
        "start_ns": span["start_time_unix_nano"],
        "end_ns": span["end_time_unix_nano"],
        "run_key": run_key(attributes, span["trace_id"])[0],
    }
