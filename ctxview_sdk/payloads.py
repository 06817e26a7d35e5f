"""Provider request payloads -> item drafts (keyword arguments for ``Call.add_item``), in render order.

Both providers render tools first, then the system prompt, then the messages; the drafts follow that order
whatever the order of the keys in the request. Ids are stable across calls: ``tool:<name>``,
``system:<n>`` (the n-th system piece, from 0) and ``msg:<hash of role + content>``. The ``Call`` adds a
``#2``, ``#3`` suffix when the same id occurs again in one call.

``cache_control`` markers are taken out of the rendered content and become ``cache_breakpoint``: moving a
breakpoint from one message to the next does not change what the model reads, and must not look like a
rewritten history.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .manifest import ROLES, message_id, render

logger = logging.getLogger("ctxview_sdk")

Draft = dict[str, Any]


def anthropic_items(request: Mapping[str, Any]) -> list[Draft]:
    """Item drafts for an Anthropic Messages API request (``tools``, ``system``, ``messages``)."""
    drafts = [_tool_draft(tool, _name(tool)) for tool in _mappings(request.get("tools"), "tools")]
    system = request.get("system")
    blocks = [system] if isinstance(system, str) else _mappings(system, "system")
    for index, block in enumerate(blocks):
        marked = False
        if isinstance(block, Mapping):
            block, marked = _unmark(block)
            if block.keys() == {"type", "text"} and block["type"] == "text":
                block = block["text"]  # a plain text block reads as its text; a richer one as its JSON
        drafts.append(_system_draft(index, render(block), marked))

    tool_names: dict[Any, str] = {}  # tool_use id -> tool name, to name the results that answer them
    for message in _mappings(request.get("messages"), "messages"):
        role, content = message.get("role", ""), message.get("content")
        marked = False
        blocks = []
        if isinstance(content, list):
            content, marked = _unmark_all(content)
            blocks = [block for block in content if isinstance(block, Mapping)]
        types = {block.get("type") for block in blocks}
        rendered = render(content)
        draft: Draft = {
            "id": message_id(str(role), rendered),
            "content": rendered,
            "cache_breakpoint": marked,
        }
        if role == "assistant":
            called = [block for block in blocks if block.get("type") in ("tool_use", "server_tool_use")]
            tool_names.update((block.get("id"), str(block.get("name"))) for block in called)
            names = [str(block.get("name")) for block in called]
            kind = "tool_call" if called else "message"
            draft.update(kind=kind, bucket="conversation", role="assistant", source=_join(names))
        elif role == "user" and blocks and len(blocks) == len(content) and types == {"tool_result"}:
            names = [tool_names.get(block.get("tool_use_id"), "") for block in blocks]
            draft.update(
                kind="tool_result", bucket="tool_results", role="tool", trust="tool", source=_join(names)
            )
        else:
            trust = "user" if role == "user" else None
            draft.update(
                kind="message", bucket="conversation", role=role if role in ROLES else None, trust=trust
            )
        drafts.append(draft)

    # Top-level cache_control asks the API to place the breakpoint on the last cacheable block itself.
    if isinstance(request.get("cache_control"), Mapping) and drafts:
        drafts[-1]["cache_breakpoint"] = True
    return drafts


def openai_items(request: Mapping[str, Any]) -> list[Draft]:
    """Item drafts for an OpenAI Chat Completions request (``tools``, ``messages``), or a Responses one."""
    drafts = [_tool_draft(tool, _openai_tool_name(tool)) for tool in _mappings(request.get("tools"), "tools")]
    if "messages" in request:
        messages = _mappings(request.get("messages"), "messages")
    else:  # Responses API: instructions + input (a string or a list of input items)
        messages = []
        if isinstance(request.get("instructions"), str):
            messages.append({"role": "system", "content": request["instructions"]})
        source = request.get("input")
        messages += (
            [{"role": "user", "content": source}] if isinstance(source, str) else _mappings(source, "input")
        )

    systems = 0
    tool_names: dict[Any, str] = {}  # tool call id -> function name
    for message in messages:
        role = message.get("role")
        kind = message.get("type", "message")
        body, marked = _openai_body(message)
        rendered = render(body)
        draft: Draft = {"content": rendered, "cache_breakpoint": marked}
        if role in ("system", "developer"):
            draft.update(
                id=f"system:{systems}", kind="system", bucket="system", role="system", trust="system"
            )
            systems += 1
            drafts.append(draft)
            continue
        if role == "assistant" or kind == "function_call":
            if kind == "function_call":  # Responses: one call per item
                named = [(message.get("call_id"), str(message.get("name")))]
            else:
                calls = _mappings(message.get("tool_calls"), "tool_calls")
                named = [(call.get("id"), _openai_tool_name(call)) for call in calls]
            tool_names.update(named)
            names = [name for _, name in named]
            draft.update(kind="tool_call" if names else "message", bucket="conversation", role="assistant")
            draft["source"] = _join(names)
            wire_role = "assistant"
        elif role in ("tool", "function") or kind == "function_call_output":
            call_id = message.get("tool_call_id", message.get("call_id"))
            name = tool_names.get(call_id) or message.get("name")
            draft.update(kind="tool_result", bucket="tool_results", role="tool", trust="tool")
            draft["source"] = str(name) if name else None
            wire_role = str(role or "tool")
        elif role is None:  # another Responses item type: reasoning, web_search_call, ...
            draft.update(kind=str(kind)[:64] or "other", bucket="conversation", role=None)
            wire_role = str(kind)
        else:
            draft.update(kind="message", bucket="conversation", role=role if role in ROLES else None)
            draft["trust"] = "user" if role == "user" else None
            wire_role = str(role)
        draft["id"] = message_id(wire_role, rendered)
        drafts.append(draft)
    return drafts


def reserved_output(request: Mapping[str, Any]) -> int | None:
    """The output tokens the request reserves (``max_tokens`` and its OpenAI spellings), if it says."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = request.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _tool_draft(tool: Mapping[str, Any], name: str) -> Draft:
    body, marked = _unmark(tool)
    return {
        "id": f"tool:{name}",
        "kind": "tool",
        "bucket": "tools",
        "role": None,
        "trust": "system",
        "source": name,
        "content": render(body),
        "cache_breakpoint": marked,
    }


def _system_draft(index: int, rendered: str, marked: bool) -> Draft:
    return {
        "id": f"system:{index}",
        "kind": "system",
        "bucket": "system",
        "role": "system",
        "trust": "system",
        "content": rendered,
        "cache_breakpoint": marked,
    }


def _openai_body(message: Mapping[str, Any]) -> tuple[Any, bool]:
    """What the model reads of a chat message: its text alone when that is all, else its JSON minus role."""
    body = {key: value for key, value in message.items() if key != "role"}
    if body.get("type") == "message":
        del body["type"]
    marked = False
    if isinstance(body.get("content"), list):
        body["content"], marked = _unmark_all(body["content"])
    if body.keys() == {"content"} and body["content"] is not None:
        return body["content"], marked
    return body, marked


def _unmark(block: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """The block without its ``cache_control`` (nor its nested result blocks'), and whether it had one."""
    marked = "cache_control" in block
    if marked:
        block = {key: value for key, value in block.items() if key != "cache_control"}
    if isinstance(block.get("content"), list):  # tool_result blocks nest content blocks
        inner, inner_marked = _unmark_all(block["content"])
        if inner_marked:
            block, marked = {**block, "content": inner}, True
    return block, marked


def _unmark_all(blocks: list[Any]) -> tuple[list[Any], bool]:
    result, marked = [], False
    for block in blocks:
        if isinstance(block, Mapping):
            block, block_marked = _unmark(block)
            marked = marked or block_marked
        result.append(block)
    return result, marked


def _mappings(value: Any, name: str) -> list[Mapping[str, Any]]:
    """The dicts of a list field; anything malformed is skipped with a log line, never raised."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        logger.warning("ctxview_sdk: request field %r is not a list; skipped", name)
        return []
    good = [entry for entry in value if isinstance(entry, Mapping)]
    if len(good) != len(value):
        logger.warning("ctxview_sdk: skipped %d malformed entries of %r", len(value) - len(good), name)
    return good


def _name(tool: Mapping[str, Any]) -> str:
    return str(tool.get("name") or tool.get("type") or "unnamed")


def _openai_tool_name(tool: Mapping[str, Any]) -> str:
    # Chat: {"type": "function", "function": {"name": ...}}; Responses: {"type": "function", "name": ...}.
    function = tool.get("function")
    if isinstance(function, Mapping) and function.get("name"):
        return str(function["name"])
    return _name(tool)


def _join(names: list[str]) -> str | None:
    """Tool names in first-seen order, comma-separated, for an item's ``source``."""
    unique = [name for index, name in enumerate(names) if name and name not in names[:index]]
    return ",".join(unique) or None
