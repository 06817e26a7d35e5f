"""The telemetry families ctxview reads, in order of preference: one module each. No Django here.

A new family is one module here (its keys, how it marks spans, reads content, reports usage) and one
line in ``FAMILIES``; ``ingest.normalise`` and ``ingest.usage`` read every family through this registry.
Where two families could read the same span, the earlier one's reading wins.
"""

from ingest.families import (
    claude_code,
    codex,
    gemini_cli,
    logfire,
    mcp,
    openinference,
    openllmetry,
    otel_events,
    otel_genai,
    pydantic_ai,
)
from ingest.families.base import AGENT, MODEL_CALL, TOOL, Family, Read, SessionCall, Sessions
from ingest.families.messages import Event

FAMILIES: tuple[Family, ...] = (
    otel_genai.FAMILY,
    openinference.FAMILY,
    openllmetry.FAMILY,
    otel_events.FAMILY,  # only where no family found messages on the span itself
    pydantic_ai.FAMILY,
    logfire.FAMILY,
    mcp.FAMILY,  # MCP's own spans: a tools/call is a tool execution
    # The coding CLIs: calls assembled per session from their logs and spans (ingest.sessions).
    claude_code.FAMILY,
    codex.FAMILY,
    gemini_cli.FAMILY,
)

# The families whose calls are assembled per session, not read span by span.
SESSION_FAMILIES: tuple[Family, ...] = tuple(family for family in FAMILIES if family.sessions is not None)

# When families disagree on what a span is (a span carrying two families' marks), the model call wins.
_PRIORITY = {MODEL_CALL: 0, TOOL: 1, AGENT: 2}


def classify(name: str, attributes: dict) -> str | None:
    """model_call, tool, agent, or None for spans no family interprets (or that a CLI family assembles)."""
    if any(family.claims_span(name, attributes) for family in SESSION_FAMILIES):
        return None
    best = None
    for family in FAMILIES:
        kind = family.kind_of(name, attributes)
        if kind is not None and (best is None or _PRIORITY[kind] < _PRIORITY[best]):
            best = kind
    return best


def input_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    """The input messages and the attribute keys they came from (None: content not captured)."""
    for family in FAMILIES:
        if family.input_messages is not None:
            messages, keys = family.input_messages(attributes, content, events)
            if messages is not None:
                return messages, keys
    return None, []


def output_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    for family in FAMILIES:
        if family.output_messages is not None:
            messages, keys = family.output_messages(attributes, content, events)
            if messages is not None:
                return messages, keys
    return None, []


def system_parts(attributes: dict, content: dict) -> Read:
    for family in FAMILIES:
        if family.system is not None:
            parts, keys = family.system(attributes, content)
            if parts is not None:
                return parts, keys
    return None, []


def tool_definitions(attributes: dict, content: dict) -> Read:
    """Tool definitions in whatever shape the family sends them (OTel, OpenAI, Anthropic, flattened)."""
    for family in FAMILIES:
        if family.tools is not None:
            definitions, keys = family.tools(attributes, content)
            if definitions is not None:
                return definitions, keys
    return None, []


def finish_reasons(attributes: dict, content: dict) -> tuple[str, ...] | None:
    """Finish reasons where a family puts them beside the span's attribute (output messages, response)."""
    for family in FAMILIES:
        if family.finish_reasons is not None:
            reasons = family.finish_reasons(attributes, content)
            if reasons:
                return reasons
    return None


def context_edits(attributes: dict) -> list[dict]:
    """What was done to the call's context before the model saw it (context editing, compaction)."""
    return [edit for family in FAMILIES if family.context_edits for edit in family.context_edits(attributes)]


def continues(attributes: dict) -> tuple[str, str] | None:
    """(what, its id) when the request continues a response or conversation the provider keeps, as the
    first family that says so tells."""
    for family in FAMILIES:
        if family.continues is not None and (found := family.continues(attributes)) is not None:
            return found
    return None


def response_id(attributes: dict) -> str | None:
    """The response's id where a family keeps it beside the shared keys, as the first that has it tells."""
    for family in FAMILIES:
        if family.response_id is not None and (found := family.response_id(attributes)):
            return found
    return None


def sub_agents(attributes: dict) -> tuple[str, ...]:
    """The names of the sub-agents an agent span declares, as any family sends them."""
    found = (name for family in FAMILIES if family.sub_agents for name in family.sub_agents(attributes))
    return tuple(dict.fromkeys(found))


def graph_step(attributes: dict) -> tuple[str, str] | None:
    """(the step, the graph it is a step of) when an agent span is one step of a graph run, as the first
    family that says so tells."""
    for family in FAMILIES:
        if family.graph_step is not None and (found := family.graph_step(attributes)) is not None:
            return found
    return None


def tool_name(name: str, attributes: dict) -> str:
    """The tool a tool-execution span ran, where no shared key (``semconv.TOOL_NAME``) names it."""
    for family in FAMILIES:
        if family.tool_name is not None and (found := family.tool_name(name, attributes)):
            return found
    return ""


def tool_details(attributes: dict) -> dict:
    """What a tool-execution span adds to its execution beyond the shared keys (MCP: method, session,
    server), by attribute name."""
    return {
        key: value
        for family in FAMILIES
        if family.tool_details
        for key, value in family.tool_details(attributes).items()
    }


def _joined(name: str) -> tuple:
    return tuple(dict.fromkeys(value for family in FAMILIES for value in getattr(family, name)))


def _usage_keys(figure: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(key for family in FAMILIES for key in getattr(family.usage, figure)))


content_attributes = otel_genai.content_attributes  # the lingua franca: other readers see its keys too

CONTENT_KEYS: tuple[str, ...] = _joined("content_keys")
CONTENT_PREFIXES: tuple[str, ...] = _joined("content_prefixes")
OTHER_CONTENT_KEYS: tuple[str, ...] = _joined("other_content_keys")
OTHER_CONTENT_PREFIXES: tuple[str, ...] = _joined("other_content_prefixes")
CONTENT_EVENTS = frozenset(_joined("content_events"))
CONTENT_LOG_EVENTS = frozenset(_joined("content_log_events"))
LOG_CONTENT_KEYS: tuple[str, ...] = _joined("log_content_keys")

INPUT_TOKENS = _usage_keys("input")
OUTPUT_TOKENS = _usage_keys("output")
CACHE_READ_TOKENS = _usage_keys("cache_read")
CACHE_WRITE_TOKENS = _usage_keys("cache_write")
REASONING_TOKENS = _usage_keys("reasoning")

__all__ = [
    "AGENT",
    "CACHE_READ_TOKENS",
    "CACHE_WRITE_TOKENS",
    "CONTENT_EVENTS",
    "CONTENT_KEYS",
    "CONTENT_LOG_EVENTS",
    "CONTENT_PREFIXES",
    "FAMILIES",
    "INPUT_TOKENS",
    "LOG_CONTENT_KEYS",
    "MODEL_CALL",
    "OTHER_CONTENT_KEYS",
    "OTHER_CONTENT_PREFIXES",
    "OUTPUT_TOKENS",
    "REASONING_TOKENS",
    "SESSION_FAMILIES",
    "TOOL",
    "Event",
    "Family",
    "SessionCall",
    "Sessions",
    "classify",
    "content_attributes",
    "context_edits",
    "continues",
    "finish_reasons",
    "graph_step",
    "input_messages",
    "output_messages",
    "response_id",
    "sub_agents",
    "system_parts",
    "tool_definitions",
    "tool_details",
    "tool_name",
]
