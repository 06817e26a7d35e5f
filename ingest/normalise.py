"""Spans of any GenAI instrumentation family -> one call record each. No Django here.

Be liberal in what is accepted: content may be a JSON string or an OTLP structured value, flattened
into indexed keys (OpenInference, legacy OpenLLMetry), or carried by span events or log records.
Everything is normalised to the OTel message shape ``{"role", "parts": [...]}`` and then to the
call's ordered items, in provider render order: tools, system, messages.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from ctxcore.vocabulary import CONTENT_LIMIT, Item, Usage, digest, message_id
from ingest import continuations, families, semconv, tokens
from ingest import manifest as manifest_module
from ingest.families import AGENT, MODEL_CALL, TOOL, Event, classify, providers
from ingest.families.messages import finish_reasons_of, is_number, parse_json
from ingest.records import CallRecord, TokenCounter
from ingest.rendering import render
from ingest.usage import normalise_usage, provider_name

__all__ = ["AGENT", "MODEL_CALL", "TOOL", "CallRecord", "Event", "call_record", "classify", "run_key"]

# Attribute keys (and prefixes of flattened keys) that carry content; moved out of the stored span once
# they are represented as items, so a long run does not store its history once per call.
CONTENT_KEYS = (*families.CONTENT_KEYS, semconv.CTXVIEW_MANIFEST)
CONTENT_PREFIXES = families.CONTENT_PREFIXES


# --- Small helpers -------------------------------------------------------------------------------


def _first_text(attributes: dict, keys: Iterable[str]) -> tuple[str, str]:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip(), key
    return "", ""


# A run's key source when nothing named the run: its key is the trace id.
TRACE_KEY_SOURCE = "trace_id"


def run_key(attributes: dict, trace_id: str) -> tuple[str, str]:
    """The run a call belongs to and where that key came from; the trace id when nothing names one."""
    value, key = _first_text(attributes, semconv.RUN_KEYS)
    if value:
        return value[:200], key
    return trace_id, TRACE_KEY_SOURCE


def tool_name(definition: dict) -> str:
    function = definition.get("function")
    if isinstance(function, dict) and function.get("name"):
        return str(function["name"])
    # Bedrock Converse's tagged union, kept whole by openinference-instrumentation-bedrock (0.1.60+).
    for tag in ("toolSpec", "systemTool"):
        spec = definition.get(tag)
        if isinstance(spec, dict) and spec.get("name"):
            return str(spec["name"])
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
        content_hash: str = "",
        source: str | None = None,
    ) -> None:
        seen[item_id] = seen.get(item_id, 0) + 1
        if seen[item_id] > 1:
            item_id = f"{item_id}#{seen[item_id]}"
        content_hash = content_hash or digest(text)
        items.append(
            Item.made(
                id=item_id,
                kind=kind,
                bucket=bucket,
                role=role,
                position=len(items),
                tokens=count(content_hash, token_text) + overhead,
                hash=content_hash,
                trust=trust,
                source=source,
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
    asked: dict[str, str] = {}  # tool call id -> the tool's name, from the calls asked for so far
    for message in messages or []:
        text = render(message)
        role = message["role"]
        source = None
        if role in ("system", "developer"):
            kind, bucket, trust = "system", "system", "system"
        elif _is_tool_result(message):
            kind, bucket, trust = "tool_result", "tool_results", "tool"
            source = _answered_tool(message, asked)
        else:
            kind, bucket, trust = "message", "conversation", "user" if role == "user" else None
            asked.update(_asked_tools(message))
        content_hash = digest(text)
        add(
            message_id(content_hash),
            kind,
            bucket,
            role,
            trust,
            text,
            _token_text(message),
            tokens.MESSAGE_OVERHEAD,
            content_hash,
            source,
        )
    return items


def _asked_tools(message: dict) -> dict[str, str]:
    """Tool call id -> tool name, for the tool calls a message asks for."""
    return {
        str(part["id"]): str(part["name"])[:200]
        for part in message["parts"]
        if part.get("type") == "tool_call" and part.get("id") and part.get("name")
    }


def _answered_tool(message: dict, asked: dict[str, str]) -> str | None:
    """The tool whose result a tool result message is: its own name, else the name of the call it answers
    (the window shows the tool was called even where the call's output was not recorded)."""
    if message.get("name"):
        return str(message["name"])[:200]
    for part in message["parts"]:
        if part.get("name"):
            return str(part["name"])[:200]
        if part.get("id") is not None and str(part["id"]) in asked:
            return asked[str(part["id"])]
    return None


def user_fingerprint(derived: list[Item]) -> str | None:
    """Hash of the last user message that is not only tool results: a new one starts a new turn.

    ``derived``: the items ``derive_items`` made of the call's messages (a message's item hash is the
    hash of the message rendered)."""
    for item in reversed(derived):
        if item.kind == "message" and item.role == "user":
            return item.hash
    return None


def tool_calls_of(messages: list[dict] | None) -> list[dict]:
    return [
        {"name": part.get("name"), "id": part.get("id")}
        for message in messages or []
        for part in message["parts"]
        if part.get("type") == "tool_call"
    ]


# --- The call record -----------------------------------------------------------------------------


def _not_captured(attributes: dict) -> str:
    """Why the call has no content: it was stored elsewhere and referenced (say where), or not captured."""
    refs = [key for key in semconv.CONTENT_REFS if isinstance(attributes.get(key), str) and attributes[key]]
    if not refs:
        return "content was not captured: enable message content capture in the instrumentation"
    where = str(attributes[refs[0]])[:160]
    return (
        f"content referenced, not captured: stored elsewhere ({refs[0]}: {where}); ctxview does not fetch it"
    )


def _finish_reasons(
    attributes: dict,
    content: dict,
    outputs: list[dict] | None,
    provider: str,
    scope_name: str,
    scope_version: str,
    asked_for_tools: bool,
) -> tuple[str, ...]:
    """The call's finish reasons in the OTel vocabulary (``stop``, ``tool_call``, ``length``…).

    From the span's attribute, else where the family puts them (output messages, a response object);
    provider words mapped (``tool_use`` -> ``tool_call``); "stop" read as ``tool_call`` where the
    provider or the instrumentation says "stop" for an answer that asks for tools (providers table)."""
    reasons: tuple[str, ...] = ()
    for key in semconv.FINISH_REASONS:
        value = parse_json(attributes.get(key))
        if isinstance(value, list):
            reasons = tuple(str(reason) for reason in value)
            break
        if isinstance(value, str) and value:
            reasons = (value,)
            break
    if not reasons:
        reasons = families.finish_reasons(attributes, content) or finish_reasons_of(outputs or []) or ()
    # Content from traces: a bounded number of bounded words.
    reasons = tuple(providers.finish_reason(str(reason)[:100]) for reason in reasons[:20])
    provider_row = providers.provider(provider)
    says_stop = (provider_row is not None and provider_row.stop_for_tool_calls) or any(
        row.finish_reasons == providers.STOP_FOR_TOOL_CALLS
        for row in providers.instrumentations(scope_name, scope_version, provider)
    )
    if says_stop and asked_for_tools and reasons and set(reasons) == {"stop"}:
        return ("tool_call",)
    return reasons


MAX_TURN = 2**31 - 1  # the column's range


def _turn_hint(attributes: dict) -> int | None:
    value = attributes.get(semconv.CTXVIEW_TURN)
    if isinstance(value, str) and is_number(value, 10):
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
    scope_name, scope_version = span.get("scope_name", ""), span.get("scope_version", "")
    usage = normalise_usage(attributes, provider, scope_name, scope_version)
    notes = list(usage.notes)

    read = _read_content(attributes, events)
    derived = derive_items(read.tools, read.system, read.inputs, count)
    window = _window(attributes, read, derived, notes)
    notes += _edit_notes(attributes)
    response_id = _response_id(attributes)
    # Only a response with an id can be continued: only then is the answer kept, as items.
    answer = continuations.answer_messages(read.outputs) if response_id else []
    output_items = derive_items(None, None, answer, count) if answer else []
    continues_response = ""
    if not window.captured and window.source != "explicit":
        notes.append(_not_captured(attributes))
    elif (continued := families.continues(attributes)) is not None and window.source == "derived":
        notes.append(continuations.not_rebuilt_note(*continued))
        if continued[0] == continuations.PREVIOUS_RESPONSE:
            continues_response = continued[1]

    tool_calls = tool_calls_of(read.outputs)
    finish_reasons = _finish_reasons(
        attributes, read.content, read.outputs, provider, scope_name, scope_version, bool(tool_calls)
    )
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
        response_id=response_id,
        usage=usage,
        turn_hint=_turn_hint(attributes),
        user_fingerprint=user_fingerprint(derived),
        content_captured=window.captured,
        manifest_source=window.source,
        manifest_error=window.error[:1000],
        items=tuple(window.items),
        excluded=window.excluded,
        budget=window.budget,
        prompt_version=window.prompt_version[:200],
        tool_calls=tuple(tool_calls),
        tool_definitions=tuple(tool_name(tool) for tool in window.tools)
        if window.tools is not None
        else None,
        finish_reasons=finish_reasons,
        notes=tuple(notes),
        moved_keys=tuple(dict.fromkeys(read.moved)),
        carries_request=_carries_request(attributes, read, window, usage, response_id, finish_reasons),
        continues_response=continues_response,
        window_gap=continues_response,  # until rebuilt
        output_items=tuple(output_items),
    )


@dataclass
class _Content:
    """What a span's attributes and content events say the model was sent and answered, read once."""

    content: dict | None  # a details event's whole conversation as one parsed JSON body, if any
    tools: list | None
    system: list | None
    inputs: list | None
    outputs: list | None
    moved: list[str]  # the span's own attributes that held it: moved out of the span into items


def _read_content(attributes: dict, events: list[Event]) -> _Content:
    # Details events may carry the whole conversation as one JSON body: parse it once, not per reader.
    content = families.content_attributes(attributes, events)
    tools, tool_keys = families.tool_definitions(attributes, content)
    system, system_keys = families.system_parts(attributes, content)
    inputs, input_keys = families.input_messages(attributes, content, events)
    outputs, output_keys = families.output_messages(attributes, content, events)
    # Only what the span itself carried is moved out of it; content from events stays where it was.
    moved = [
        key
        for key in tool_keys + system_keys + input_keys + output_keys
        if key in attributes or (key.endswith(".") and any(name.startswith(key) for name in attributes))
    ]
    return _Content(content, tools, system, inputs, outputs, moved)


@dataclass
class _Window:
    """The window a record states: the sender's ctxview.manifest where it sent a valid one, else the
    items derived from the content (source "derived"), or nothing known (source "none")."""

    items: list[Item]
    tools: list | None
    source: str
    captured: bool  # some content of the window was recorded
    excluded: tuple[dict, ...] = ()
    budget: dict | None = None
    prompt_version: str = ""
    error: str = ""  # why the manifest was not used, or its warnings


def _window(attributes: dict, read: _Content, derived: list[Item], notes: list[str]) -> _Window:
    captured = read.inputs is not None or read.system is not None
    window = _Window(derived, read.tools, "derived" if captured or read.tools else "none", captured)
    raw_manifest = attributes.get(semconv.CTXVIEW_MANIFEST)
    if raw_manifest is not None:
        try:
            manifest = manifest_module.parse(raw_manifest)
        except manifest_module.ManifestError as exc:
            window.error = str(exc)
            notes.append(f"the ctxview.manifest was not used: {exc}")
        else:
            items = list(manifest.items)
            # Without tool definitions, the catalogue the sender declared: its tool items ("tool:<name>" by
            # the SDK's convention).
            tools = read.tools
            if tools is None:
                tools = [{"name": item.id.removeprefix("tool:")} for item in items if item.bucket == "tools"]
            window = _Window(
                items,
                tools,
                "explicit",
                captured or any(item.content is not None for item in items),
                manifest.excluded,
                manifest.budget,
                manifest.prompt_version,
                "; ".join(manifest.warnings),
            )
            read.moved.append(semconv.CTXVIEW_MANIFEST)
    stated_limit = attributes.get(semconv.CONTEXT_WINDOW_SIZE)
    if window.budget is None and type(stated_limit) is int and 0 < stated_limit < 2**53:
        # The context limit an instrumentation states for the call: the window's share of it is known.
        window.budget = {"limit": int(stated_limit), "input": None, "reserved_output": None}
    return window


def _edit_notes(attributes: dict) -> list[str]:
    """A note for each context edit (at most 20) the provider made before the model saw the window."""
    notes = []
    for edit in families.context_edits(attributes)[:20]:
        cleared = ", ".join(
            f"{value} {key.removeprefix('cleared_').replace('_', ' ')}"
            for key, value in edit.items()
            if key != "type"
        )
        note = f"context edited before the model saw it: {edit['type']}" + (
            f" ({cleared})" if cleared else ""
        )
        notes.append(note[:300])
    return notes


def _response_id(attributes: dict) -> str:
    return (_first_text(attributes, semconv.RESPONSE_ID)[0] or families.response_id(attributes) or "")[:200]


def _carries_request(
    attributes: dict,
    read: _Content,
    window: _Window,
    usage: Usage,
    response_id: str,
    finish_reasons: tuple[str, ...],
) -> bool:
    """A span that declares a GenAI operation (chat, generate_content...) is a request by declaration; one
    that is only of a model-call kind (OpenInference's LLM span kind, which LlamaIndex gives any method
    of its LLM classes) must show one: messages, usage or a response."""
    figures = (
        usage.uncached,
        usage.cache_write,
        usage.cache_read,
        usage.output,
        usage.reasoning,
        usage.prompt_total,
    )
    return bool(
        attributes.get(semconv.OPERATION_NAME)
        or window.captured
        or read.outputs
        or window.tools
        or window.source == "explicit"
        or any(figure is not None for figure in figures)
        or response_id
        or finish_reasons
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
_ALL_CONTENT_KEYS = frozenset(
    CONTENT_KEYS + families.OTHER_CONTENT_KEYS + semconv.TOOL_CALL_ARGUMENTS + semconv.TOOL_CALL_RESULT
)
_ALL_CONTENT_PREFIXES = CONTENT_PREFIXES + families.OTHER_CONTENT_PREFIXES


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
        if event["name"] in families.CONTENT_EVENTS
        else event
        for event in row.get("events", [])
    ]
    return {**row, "attributes": attributes, "events": events}


def operation_record(span: dict, kind: str) -> dict:
    """A tool execution or agent invocation: what ran, with the sizes of what went in and out."""
    attributes = span["attributes"]
    name, _ = _first_text(attributes, semconv.TOOL_NAME if kind == TOOL else semconv.AGENT_NAME)
    if not name and kind == TOOL:
        name = families.tool_name(span.get("name", ""), attributes)
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
        "details": families.tool_details(attributes) if kind == TOOL else {},
    }
