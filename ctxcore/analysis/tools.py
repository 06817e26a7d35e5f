"""The tool catalogue of a call, and which tools a run paid for without calling."""

from collections.abc import Mapping, Sequence

from ctxcore.analysis.inputs import CallInput
from ctxcore.vocabulary import Item


def tool_name(item: Item) -> str:
    """A tools-bucket item's tool name: derived ids read ``tool:<name>`` (``#2`` for a repeat)."""
    if item.id.startswith("tool:"):
        return item.id[len("tool:") :].split("#", 1)[0]
    return item.source or item.id


def offered(definitions: Sequence[str] | None, agent_tools: Sequence[str]) -> tuple[str, ...] | None:
    """A call's tool names, then those its agent's span declares (its sub-agents, which the model calls as
    tools). None stays None: an agent's sub-agents alone are not the call's whole catalogue."""
    if definitions is None:
        return None
    return tuple(dict.fromkeys([*definitions, *agent_tools]))


def catalogue(call: CallInput) -> dict[str, int | None] | None:
    """Tool name -> its tokens in this call's window; None when the call did not say what it offered."""
    in_window = {tool_name(item): item.tokens for item in call.items if item.bucket == "tools"}
    definitions = call.tool_definitions if call.tool_definitions is not None else tuple(in_window) or None
    names = offered(definitions, call.agent_tools)
    return {name: in_window.get(name) for name in names} if names is not None else None


def called_names(call: CallInput) -> list[str]:
    """Names of the tools the model asked for in this call, once each, in order."""
    names = (str(entry.get("name")) for entry in call.tool_calls if entry.get("name"))
    return list(dict.fromkeys(names))


def answered_names(call: CallInput) -> list[str]:
    """Names of the tools whose results are in this call's window: they were called, whether or not the
    call that asked for them recorded its output."""
    names = (item.source for item in call.items if item.kind == "tool_result" and item.source)
    return list(dict.fromkeys(names))


def says_what_it_called(call: CallInput) -> bool:
    """Whether the call tells which tools were called: it names the ones it asked for, or its window
    holds the conversation (where results show what was called). A call recorded without its content
    (no message in its window, as google-adk's telemetry sends them) may have called any tool."""
    return bool(call.tool_calls) or any(item.kind in ("message", "tool_result") for item in call.items)


def add_tokens(total: int | None, tokens: int | None) -> int | None:
    """A sum of definition tokens: unknown once one part is (a tool named with no definition in the window,
    such as a sub-agent its agent's span declares), never counted as 0."""
    return None if total is None or tokens is None else total + tokens


def updated_usage(usage: Mapping[str, Sequence[int | None]], call: CallInput) -> dict[str, list[int | None]]:
    """Per tool: in how many calls' catalogues it was, and its tokens summed over those calls."""
    offered = catalogue(call)
    if not offered:
        return dict(usage)
    updated = dict(usage)
    for name, tokens in offered.items():
        calls, total = updated.get(name, (0, 0))
        updated[name] = [calls + 1, add_tokens(total, tokens)]
    return updated
