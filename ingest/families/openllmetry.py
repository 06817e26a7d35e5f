"""OpenLLMetry (Traceloop): the releases before ``gen_ai.operation.name`` and its own keys since.

Model calls by ``llm.request.type``, tools and agents by ``traceloop.span.kind`` — only on spans without
an operation name (the current releases send the OTel GenAI attributes). Messages flattened into
``gen_ai.prompt.<i>.*`` / ``gen_ai.completion.<i>.*``, tools into ``llm.request.functions.<i>.*``. What its
instrumentations leave out or report differently: ``providers.INSTRUMENTATIONS``.
"""

from ingest import semconv
from ingest.families.base import AGENT, MODEL_CALL, TOOL, Family, Read, UsageKeys
from ingest.families.messages import (
    Event,
    indexed,
    message,
    nest,
    parse_json,
    parts_of,
    tool_call_parts,
    tool_response,
)

REQUEST_TYPE = "llm.request.type"
MODEL_CALL_REQUEST_TYPES = frozenset({"chat", "completion"})
SPAN_KIND = "traceloop.span.kind"
AGENT_KINDS = frozenset({"agent", "workflow"})
PROMPT = "gen_ai.prompt"
COMPLETION = "gen_ai.completion"
FUNCTIONS = "llm.request.functions"


def kind_of(name: str, attributes: dict) -> str | None:
    if attributes.get(semconv.OPERATION_NAME):
        return None  # a current release: the OTel GenAI family reads it
    if str(attributes.get(REQUEST_TYPE) or "").lower() in MODEL_CALL_REQUEST_TYPES:
        return MODEL_CALL
    span_kind = str(attributes.get(SPAN_KIND) or "").lower()
    if span_kind == "tool":
        return TOOL
    if span_kind in AGENT_KINDS:
        return AGENT
    return None


def _messages(attributes: dict, prefix: str) -> list[dict] | None:
    entries = indexed(nest(attributes, prefix))
    if not entries:
        return None
    messages = []
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        parts = parts_of(entry.get("content")) + tool_call_parts(entry.get("tool_calls"))
        if entry.get("tool_call_id"):
            parts = tool_response(entry["tool_call_id"], entry.get("content"))
        messages.append(message(entry.get("role"), parts))
    return messages


def input_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    messages = _messages(attributes, PROMPT)
    return messages, [PROMPT + "."] if messages is not None else []


def output_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    messages = _messages(attributes, COMPLETION)
    return messages, [COMPLETION + "."] if messages is not None else []


def tools(attributes: dict, content: dict) -> Read:
    functions = [entry for entry in indexed(nest(attributes, FUNCTIONS)) if isinstance(entry, dict)]
    if not functions:
        return None, []
    return [{key: parse_json(value) for key, value in entry.items()} for entry in functions], [
        FUNCTIONS + "."
    ]


def finish_reasons(attributes: dict, content: dict) -> tuple[str, ...] | None:
    """``gen_ai.completion.<i>.finish_reason`` of the legacy releases."""
    reasons = tuple(
        entry["finish_reason"]
        for entry in indexed(nest(attributes, COMPLETION))
        if isinstance(entry, dict) and isinstance(entry.get("finish_reason"), str) and entry["finish_reason"]
    )
    return reasons or None


FAMILY = Family(
    name="openllmetry",
    kind_of=kind_of,
    input_messages=input_messages,
    output_messages=output_messages,
    tools=tools,
    content_prefixes=(PROMPT + ".", COMPLETION + ".", FUNCTIONS + "."),
    other_content_prefixes=("llm.prompts.", "llm.choices."),
    usage=UsageKeys(
        cache_read=("gen_ai.usage.cache_read_input_tokens",),
        cache_write=("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens"),
        reasoning=("llm.usage.reasoning_tokens",),
    ),
    finish_reasons=finish_reasons,
)
