"""OpenInference (Arize Phoenix's instrumentations): spans marked by ``openinference.span.kind``.

Messages and tools are flattened into indexed keys (``llm.input_messages.0.message.role``,
``llm.tools.0.tool.json_schema``); usage in ``llm.token_count.*``, the prompt figure including cached
tokens — except where ``providers.INSTRUMENTATIONS`` says otherwise (Bedrock, Anthropic before 0.1.14).
"""

from typing import Any

from ingest import semconv
from ingest.families.base import AGENT, MODEL_CALL, PREVIOUS_RESPONSE, TOOL, Family, Read, UsageKeys
from ingest.families.flattened import entries, messages_reader, read_tools
from ingest.families.messages import indexed, message, parse_json, parts_of, tool_call_parts, tool_response

SPAN_KIND = "openinference.span.kind"
KINDS = {"LLM": MODEL_CALL, "TOOL": TOOL, "AGENT": AGENT}
INPUT_MESSAGES = "llm.input_messages"
OUTPUT_MESSAGES = "llm.output_messages"
TOOLS = "llm.tools"
METADATA = "metadata"  # JSON; the Anthropic instrumentation adds the response's cache_miss_reason
# The request's parameters as JSON, minus its input: the Responses API's previous_response_id and
# conversation are kept here (openinference-instrumentation-openai 0.1.66), the earlier turns are not.
INVOCATION_PARAMETERS = "llm.invocation_parameters"
OUTPUT_VALUE = "output.value"  # the response object as JSON (Responses API: no llm.finish_reason)
MAX_RESPONSE_ID = 200
# A response object longer than this is not parsed for its id (the parse costs more than the id is worth):
# a request continuing that response keeps the items it sent, and its note says so.
MAX_RESPONSE_JSON = 1_000_000
# openinference-instrumentation-smolagents: an AGENT span lists its managed agents
# (``smolagents.managed_agents.0.name``), which smolagents offers its model as tools; the LLM spans'
# ``llm.tools`` leave them out (0.1.43).
MANAGED_AGENTS = "smolagents.managed_agents"
MAX_SUB_AGENTS = 100
# LangGraph's run metadata, which openinference-instrumentation-langchain copies into ``metadata`` on every
# span of a node's run: its checkpoint namespace, one ``node:task`` segment per graph level, joined by "|"
# (``research_agent:6ced…|agent:d4cd…`` in a subgraph; langgraph 1.2.24). That instrumentation marks a span
# AGENT whenever its name holds "agent" (0.1.80): a graph named ``weather_agent`` and, at each step, its
# model node ``agent`` both are.
LANGGRAPH_NAMESPACE = "langgraph_checkpoint_ns"
LANGGRAPH_LEVELS = "|"

# The Responses API has a status, no finish reason: as openinference-instrumentation-openai-agents maps it.
_RESPONSE_STATUS = {"completed": "stop", "failed": "error", "cancelled": "cancelled"}
_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def kind_of(name: str, attributes: dict) -> str | None:
    return KINDS.get(str(attributes.get(SPAN_KIND) or "").upper())


def _message(entry: Any) -> dict:
    fields = entry.get("message", {}) if isinstance(entry, dict) else {}
    fields = fields if isinstance(fields, dict) else {}
    parts = []
    for content in indexed(fields.get("contents")):
        block = content.get("message_content", {}) if isinstance(content, dict) else {}
        block = block if isinstance(block, dict) else {}
        kind = block.get("type", "text")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        else:
            parts.append({"type": kind, **{k: v for k, v in block.items() if k != "type"}})
    if "content" in fields:
        parts = parts_of(fields["content"]) + parts
    parts += tool_call_parts(fields.get("tool_calls"))
    if fields.get("tool_call_id"):
        # OpenInference keeps a tool result's text in message.content with its call id beside it.
        # A text part may hold no string (an attribute sent without a value): it adds no text.
        texts = [
            part["content"]
            for part in parts
            if part.get("type") == "text" and isinstance(part.get("content"), str)
        ]
        parts = tool_response(fields["tool_call_id"], "".join(texts))
    return message(fields.get("role"), parts, fields.get("name"))


input_messages = messages_reader(INPUT_MESSAGES, _message)
output_messages = messages_reader(OUTPUT_MESSAGES, _message)


def _definition(schema: Any) -> dict | None:
    """A tool's definition; None for junk and for a Bedrock Converse cache point among the tools (it
    marks where to cache: no tool)."""
    return schema if isinstance(schema, dict) and set(schema) != {"cachePoint"} else None


def _tool(entry: dict) -> dict | None:
    tool = entry.get("tool")
    return _definition(parse_json(tool.get("json_schema")) if isinstance(tool, dict) else None)


def tools(attributes: dict, content: dict) -> Read:
    found = read_tools(attributes, TOOLS, _tool)
    if found[0] is not None:
        return found
    # CrewAI's event listener sends the whole list as one JSON attribute, in the provider's own shape.
    whole = parse_json(attributes.get(TOOLS))
    definitions = [tool for entry in whole if (tool := _definition(entry))] if isinstance(whole, list) else []
    return (definitions, [TOOLS]) if definitions else (None, [])


def sub_agents(attributes: dict) -> tuple[str, ...]:
    """The managed agents an AGENT span names: flattened (as smolagents sends them) or one JSON list."""
    found = entries(attributes, MANAGED_AGENTS) or parse_json(attributes.get(MANAGED_AGENTS))
    listed = found if isinstance(found, list) else []
    names = (entry.get("name") for entry in listed if isinstance(entry, dict))
    kept = (name.strip()[:200] for name in names if isinstance(name, str) and name.strip())
    return tuple(dict.fromkeys(kept))[:MAX_SUB_AGENTS]


def graph_step(attributes: dict) -> tuple[str, str] | None:
    """A LangGraph node's run: its namespace, and its graph's (one level up; "" for the top graph)."""
    metadata = parse_json(attributes.get(METADATA))
    namespace = metadata.get(LANGGRAPH_NAMESPACE) if isinstance(metadata, dict) else None
    if not isinstance(namespace, str) or not namespace.strip():
        return None
    namespace = namespace.strip()
    return namespace, namespace.rpartition(LANGGRAPH_LEVELS)[0]


def finish_reasons(attributes: dict, content: dict) -> tuple[str, ...] | None:
    """From the Responses API object in ``output.value``: its status, or a tool call when it asked for one."""
    response = parse_json(attributes.get(OUTPUT_VALUE))
    if not isinstance(response, dict) or response.get("object") != "response":
        return None
    status = response.get("status")
    if not isinstance(status, str):
        return None
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return (_INCOMPLETE_REASONS.get(reason, "incomplete") if isinstance(reason, str) else "incomplete",)
    if status == "completed":
        output = response.get("output")
        items = output if isinstance(output, list) else []
        asked = any(isinstance(item, dict) and item.get("type") == "function_call" for item in items)
        return ("tool_call" if asked else "stop",)
    return (_RESPONSE_STATUS[status],) if status in _RESPONSE_STATUS else None


def usage_details(attributes: dict) -> dict[str, str | int]:
    """The provider's cache diagnosis: Anthropic's, which openinference-instrumentation-anthropic keeps in
    ``metadata``, or OpenAI's, in the Responses object kept in ``output.value``."""
    metadata = parse_json(attributes.get(METADATA))
    reason = metadata.get("cache_miss_reason") if isinstance(metadata, dict) else None
    if isinstance(reason, dict) and isinstance(reason.get("type"), str):
        missed = reason.get("cache_missed_input_tokens")
        return _diagnosis(semconv.ANTHROPIC_CACHE_MISS, reason["type"], missed)
    response = parse_json(attributes.get(OUTPUT_VALUE))
    diagnostics = response.get("prompt_cache_diagnostics") if isinstance(response, dict) else None
    if not isinstance(diagnostics, dict) or not isinstance(diagnostics.get("type"), str):
        return {}
    if diagnostics["type"] == "cache_hit":
        return {}  # nothing missed: no diagnosis to show
    said = diagnostics.get("reason") if diagnostics["type"] == "cache_miss" else diagnostics["type"]
    if not isinstance(said, str):
        return {}
    return _diagnosis(semconv.OPENAI_CACHE_MISS, said, diagnostics.get("cache_missed_tokens"))


def _diagnosis(prefix: str, reason: str, missed: object) -> dict[str, str | int]:
    details: dict[str, str | int] = {f"{prefix}.type": reason[:100]}
    if isinstance(missed, int) and not isinstance(missed, bool) and missed >= 0:
        details[f"{prefix}.cache_missed_input_tokens"] = missed
    return details


def context_edits(attributes: dict) -> list[dict]:
    """Anthropic's applied context edits (cleared tool uses, thinking), kept in ``metadata``."""
    metadata = parse_json(attributes.get(METADATA))
    edits = metadata.get("context_management_applied_edits") if isinstance(metadata, dict) else None
    found = []
    for edit in edits if isinstance(edits, list) else []:
        if isinstance(edit, dict) and isinstance(edit.get("type"), str):
            counts = {
                key: value
                for key, value in edit.items()
                if key.startswith("cleared_") and isinstance(value, int) and not isinstance(value, bool)
            }
            found.append({"type": edit["type"][:100], **counts})
    return found


def continues(attributes: dict) -> tuple[str, str] | None:
    """The response or conversation a Responses API request continues (the provider keeps its turns)."""
    parameters = parse_json(attributes.get(INVOCATION_PARAMETERS))
    if not isinstance(parameters, dict):
        return None
    previous = parameters.get("previous_response_id")
    if isinstance(previous, str) and previous:
        return PREVIOUS_RESPONSE, previous[:200]
    conversation = parameters.get("conversation")  # an id, or {"id": ...}
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    if isinstance(conversation, str) and conversation:
        return "conversation", conversation[:200]
    return None


def response_id(attributes: dict) -> str | None:
    """The id of the response object kept in ``output.value`` (Responses API, chat completions, Anthropic
    messages): OpenInference puts no response id attribute on the span (openai 0.1.66)."""
    value = attributes.get(OUTPUT_VALUE)
    if not isinstance(value, str) or len(value) > MAX_RESPONSE_JSON:
        return None
    response = parse_json(value)  # only an object has an id (not the answer's text, a list)
    found = response.get("id") if isinstance(response, dict) else None
    if not isinstance(found, str) or not found.strip() or len(found) > MAX_RESPONSE_ID:
        return None
    return found.strip()


FAMILY = Family(
    name="openinference",
    kind_of=kind_of,
    input_messages=input_messages,
    output_messages=output_messages,
    tools=tools,
    content_prefixes=(INPUT_MESSAGES + ".", OUTPUT_MESSAGES + ".", TOOLS + "."),
    usage=UsageKeys(
        input=("llm.token_count.prompt",),
        output=("llm.token_count.completion",),
        cache_read=("llm.token_count.prompt_details.cache_read",),
        cache_write=("llm.token_count.prompt_details.cache_write",),
        reasoning=("llm.token_count.completion_details.reasoning",),
    ),
    finish_reasons=finish_reasons,
    usage_details=usage_details,
    context_edits=context_edits,
    continues=continues,
    response_id=response_id,
    sub_agents=sub_agents,
    graph_step=graph_step,
)
