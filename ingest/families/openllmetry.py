"""OpenLLMetry (Traceloop): the releases before ``gen_ai.operation.name`` and its own keys since.

Model calls by ``llm.request.type``, tools and agents by ``traceloop.span.kind`` — only on spans without
an operation name (the current releases send the OTel GenAI attributes). Messages flattened into
``gen_ai.prompt.<i>.*`` / ``gen_ai.completion.<i>.*``, tools into ``llm.request.functions.<i>.*``. What its
instrumentations leave out or report differently: ``providers.INSTRUMENTATIONS``.
"""

from typing import Any

from ingest import semconv
from ingest.families.base import AGENT, MODEL_CALL, TOOL, Family, Read, UsageKeys
from ingest.families.flattened import entries, messages_reader, read_tools
from ingest.families.messages import (
    finish_reasons_of,
    message,
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


def _message(entry: Any) -> dict | None:
    if not isinstance(entry, dict):
        return None
    parts = parts_of(entry.get("content")) + tool_call_parts(entry.get("tool_calls"))
    if entry.get("tool_call_id"):
        parts = tool_response(entry["tool_call_id"], entry.get("content"))
    return message(entry.get("role"), parts)


input_messages = messages_reader(PROMPT, _message)
output_messages = messages_reader(COMPLETION, _message)


def _function(entry: dict) -> dict:
    return {key: parse_json(value) for key, value in entry.items()}


def tools(attributes: dict, content: dict) -> Read:
    return read_tools(attributes, FUNCTIONS, _function)


def finish_reasons(attributes: dict, content: dict) -> tuple[str, ...] | None:
    """``gen_ai.completion.<i>.finish_reason`` of the legacy releases."""
    return finish_reasons_of(entries(attributes, COMPLETION))


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
