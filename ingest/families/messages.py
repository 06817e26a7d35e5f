"""Reading content of any shape into the OTel message shape ``{"role", "parts": [...]}``. No Django here.

The families share these: values may be JSON strings or OTLP structured values, flattened into indexed
keys (``prefix.0.message.role``), in any provider's block shape (Anthropic, OpenAI, OTel parts). The
recording proxy (``ctxview.proxy.record``) builds its parts with the same functions.
"""

from dataclasses import dataclass
from typing import Any

from ctxcore.vocabulary import render
from ingest import storable


@dataclass(frozen=True)
class Event:
    """A content event tied to a span: a span event or a log record."""

    name: str
    attributes: dict
    body: Any = None


def parse_json(value: Any) -> Any:
    """A JSON string parsed, anything else as is; unparseable strings stay strings."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if stripped[:1] in ("[", "{", '"'):
            try:
                return storable.json_value(value)
            except ValueError:
                return value
    return value


def nest(attributes: dict, prefix: str) -> dict:
    """Flattened keys (``prefix.0.message.role``) as nested dicts (``{"0": {"message": {"role": …}}}``)."""
    root: dict = {}
    dotted = prefix + "."
    start = len(dotted)
    for key, value in attributes.items():
        if not key.startswith(dotted):
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


def is_number(text: str, max_digits: int) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= max_digits


def indexed(mapping: Any) -> list:
    """Values of a dict keyed by "0", "1", … in index order."""
    if not isinstance(mapping, dict):
        return []
    # isdigit() alone accepts "²", which int() refuses; indexes past 9 digits are not real either.
    keys = sorted((key for key in mapping if is_number(key, 9)), key=int)
    return [mapping[key] for key in keys]


def text_part(content: Any) -> dict:
    """A text part; content that is not a string is kept as its JSON text."""
    return {"type": "text", "content": content if isinstance(content, str) else render(content)}


def tool_call_part(call_id: Any, name: Any, arguments: Any) -> dict:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def tool_response_part(call_id: Any, response: Any) -> dict:
    return {"type": "tool_call_response", "id": call_id, "response": response}


def block_part(block: Any) -> dict:
    """One content block of any provider's shape as an OTel message part."""
    if not isinstance(block, dict):
        return text_part(block)
    kind = block.get("type")
    if kind == "text":
        return text_part(block.get("content", block.get("text", "")))
    if kind in ("tool_use", "function_call"):
        return tool_call_part(block.get("id"), block.get("name"), block.get("input"))
    if kind == "tool_result":
        return tool_response_part(block.get("tool_use_id"), block.get("content"))
    if kind is None:  # the Bedrock Converse shape (also strands'): a block is keyed by what it holds
        if isinstance(block.get("text"), str) and len(block) == 1:
            return text_part(block["text"])
        if isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            return tool_call_part(use.get("toolUseId"), use.get("name"), use.get("input"))
        if isinstance(block.get("toolResult"), dict):
            result = block["toolResult"]
            return tool_response_part(result.get("toolUseId"), result.get("content"))
    if kind == "tool_call_response" and "response" not in block and "result" in block:
        # The registry's example says "result"; the schema says "response".
        return tool_response_part(block.get("id"), block.get("result"))
    return block


def parts_of(content: Any) -> list[dict]:
    """A message's content (a string, a block, a list of blocks, or such a list as JSON) as parts."""
    content = parse_json(content) if isinstance(content, str) and content.lstrip()[:1] == "[" else content
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [block_part(block) for block in content]
    return [block_part(content)]


def unquoted(name: Any) -> Any:
    """A tool name as the provider has it: openinference-instrumentation-crewai 1.1.21 writes it as a
    Python literal (``'get_weather'``); providers allow no quotes in tool names, so the quotes are not
    part of it."""
    if isinstance(name, str) and len(name) > 2 and name[0] == name[-1] and name[0] in "'\"":
        return name[1:-1]
    return name


def tool_call_parts(tool_calls: Any) -> list[dict]:
    """OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}``) or flattened ones, as parts."""
    calls = tool_calls if isinstance(tool_calls, list) else indexed(tool_calls)
    parts = []
    for call in calls:
        if not isinstance(call, dict):
            continue
        call = call.get("tool_call", call)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = unquoted(function.get("name", call.get("name")))
        parts.append(tool_call_part(call.get("id"), name, function.get("arguments", call.get("arguments"))))
    return parts


def tool_response(call_id: Any, response: Any) -> list[dict]:
    """The parts of a tool result message: one response to one tool call."""
    return [tool_response_part(call_id, response)]


def message(role: Any, parts: list[dict], name: Any = None) -> dict:
    built = {"role": str(role or "user").lower(), "parts": parts}
    if name:
        built["name"] = name
    return built


def finish_reasons_of(messages: list) -> tuple[str, ...] | None:
    """The non-empty ``finish_reason`` strings of output messages (plain dicts), in order; None: none."""
    reasons = tuple(
        entry["finish_reason"]
        for entry in messages
        if isinstance(entry, dict) and isinstance(entry.get("finish_reason"), str) and entry["finish_reason"]
    )
    return reasons or None
