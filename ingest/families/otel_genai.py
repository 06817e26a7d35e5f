"""The OpenTelemetry GenAI semantic conventions (v1.26 to v1.41, and the genai repository's renames).

Model calls by ``gen_ai.operation.name``; content in ``gen_ai.input.messages`` / ``output.messages`` /
``system_instructions`` / ``tool.definitions`` (JSON strings or structured values), on the span or in
the ``gen_ai.client.inference.operation.details`` event; v1.26–1.27 put prompt and completion in span
events. Input figures include cached tokens.
"""

from ctxcore.analysis import limits
from ingest import semconv
from ingest.families.base import AGENT, MODEL_CALL, PREVIOUS_RESPONSE, TOOL, Family, Read, UsageKeys
from ingest.families.messages import (
    Event,
    block_part,
    finish_reasons_of,
    message,
    parse_json,
    parts_of,
    tool_call_parts,
    tool_response,
)

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
LEGACY_PROMPT = "gen_ai.prompt"  # v1.26: one JSON string (OpenLLMetry flattens gen_ai.prompt.<i>.*)
LEGACY_COMPLETION = "gen_ai.completion"
EVENT_CONTENT_PROMPT = "gen_ai.content.prompt"  # span events, v1.26–1.27
EVENT_CONTENT_COMPLETION = "gen_ai.content.completion"
EVENT_OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
COMPACTED = "gen_ai.conversation.compacted"  # genai-repo: the history was compacted for this call
# The Responses API request's previous_response_id, as ctxview's recording proxy records it (no convention
# has it yet): the request sends only its new items, OpenAI keeps the earlier turns.
OPENAI_PREVIOUS_RESPONSE = "openai.request.previous_response_id"

MODEL_CALL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion", "completion", "generate"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
# invoke_swarm: strands-agents' multi-agent swarm, a workflow around its agents.
AGENT_OPERATIONS = frozenset({"invoke_agent", "invoke_workflow", "invoke_swarm"})

# The content attributes this family reads, wherever they were sent (span, details event).
CONTENT_KEYS = (INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, TOOL_DEFINITIONS)


def kind_of(name: str, attributes: dict) -> str | None:
    operation = str(attributes.get(semconv.OPERATION_NAME) or "").lower()
    if operation in MODEL_CALL_OPERATIONS:
        return MODEL_CALL
    if operation in TOOL_OPERATIONS:
        return TOOL
    if operation in AGENT_OPERATIONS:
        return AGENT
    return None


def content_attributes(attributes: dict, events: list[Event]) -> dict:
    """The content keys from the span, completed from events (details events, legacy span events).

    Details events may carry the whole conversation as one JSON body: this parses it once per call."""
    merged = {key: attributes[key] for key in CONTENT_KEYS if key in attributes}
    for event in events:
        if event.name == EVENT_OPERATION_DETAILS:
            for source in (
                event.attributes,
                parse_json(event.body) if isinstance(event.body, (str, dict)) else None,
            ):
                if isinstance(source, dict):
                    for key in CONTENT_KEYS:
                        if key in source:
                            merged.setdefault(key, source[key])
        elif event.name == EVENT_CONTENT_PROMPT and LEGACY_PROMPT in event.attributes:
            merged.setdefault(INPUT_MESSAGES, event.attributes[LEGACY_PROMPT])
        elif event.name == EVENT_CONTENT_COMPLETION and LEGACY_COMPLETION in event.attributes:
            merged.setdefault(OUTPUT_MESSAGES, event.attributes[LEGACY_COMPLETION])
    return merged


def _messages(value) -> list[dict] | None:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (also tolerating ``content`` for ``parts``)."""
    value = parse_json(value)
    if not isinstance(value, list):
        return None
    messages = []
    for entry in value:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("parts"), list):
            parts = [block_part(part) for part in entry["parts"]]
            # litellm's otel callback (1.110) keeps OpenAI's shapes beside the parts: an assistant's
            # ``tool_calls`` list (its parts empty) and a tool result's ``tool_call_id`` (its parts text).
            if entry.get("tool_calls") and not any(part.get("type") == "tool_call" for part in parts):
                parts += tool_call_parts(entry["tool_calls"])
            answered = any(part.get("type") == "tool_call_response" for part in parts)
            if entry.get("tool_call_id") and not answered:
                texts = [part.get("content") for part in parts if part.get("type") == "text"]
                response = "\n".join(texts) if len(texts) == len(parts) else entry["parts"]
                parts = tool_response(entry["tool_call_id"], response)
        else:
            parts = parts_of(entry.get("content")) + tool_call_parts(entry.get("tool_calls") or [])
            if entry.get("tool_call_id") or (entry.get("id") and entry.get("role") == "tool"):
                parts = tool_response(entry.get("tool_call_id") or entry.get("id"), entry.get("content"))
        messages.append(message(entry.get("role"), parts, entry.get("name")))
    return messages


def input_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    if INPUT_MESSAGES in content:
        messages = _messages(content[INPUT_MESSAGES])
        if messages is not None:
            return messages, [INPUT_MESSAGES]
        if isinstance(content[INPUT_MESSAGES], str):  # v1.26: a plain prompt string
            return [message("user", parts_of(content[INPUT_MESSAGES]))], [INPUT_MESSAGES]
    return None, []


def output_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    if OUTPUT_MESSAGES in content:
        messages = _messages(content[OUTPUT_MESSAGES])
        if messages is not None:
            return messages, [OUTPUT_MESSAGES]
    return None, []


def system(attributes: dict, content: dict) -> Read:
    value = parse_json(content.get(SYSTEM_INSTRUCTIONS))
    if value is None or value == "":
        return None, []
    if isinstance(value, str):
        return [{"type": "text", "content": value}], [SYSTEM_INSTRUCTIONS]
    if not isinstance(value, list):  # one part: an object, or a number or boolean sent as it was
        value = [value]
    return [block_part(part) for part in value], [SYSTEM_INSTRUCTIONS]


def tools(attributes: dict, content: dict) -> Read:
    value = parse_json(content.get(TOOL_DEFINITIONS))
    if isinstance(value, list):
        return [tool for entry in value if isinstance(tool := parse_json(entry), dict)], [TOOL_DEFINITIONS]
    return None, []


def finish_reasons(attributes: dict, content: dict) -> tuple[str, ...] | None:
    """The ``finish_reason`` of each output message (openai-v2 streaming sends them only there)."""
    value = parse_json(content.get(OUTPUT_MESSAGES))
    return finish_reasons_of(value) if isinstance(value, list) else None


def context_edits(attributes: dict) -> list[dict]:
    value = attributes.get(COMPACTED)
    return [{"type": limits.COMPACTED}] if value is True or value == "true" else []


def continues(attributes: dict) -> tuple[str, str] | None:
    """The response a Responses API request continues (the provider keeps its turns)."""
    previous = attributes.get(OPENAI_PREVIOUS_RESPONSE)
    if isinstance(previous, str) and previous.strip():
        return PREVIOUS_RESPONSE, previous.strip()[:200]
    return None


FAMILY = Family(
    name="otel-genai",
    kind_of=kind_of,
    input_messages=input_messages,
    output_messages=output_messages,
    system=system,
    tools=tools,
    content_keys=CONTENT_KEYS,
    other_content_keys=(LEGACY_PROMPT, LEGACY_COMPLETION),
    content_events=frozenset({EVENT_CONTENT_PROMPT, EVENT_CONTENT_COMPLETION, EVENT_OPERATION_DETAILS}),
    content_log_events=frozenset({EVENT_OPERATION_DETAILS}),
    usage=UsageKeys(
        input=("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        output=("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        cache_read=("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.input_tokens.cached"),
        cache_write=("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.input_tokens.cache_write"),
        reasoning=("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens"),
    ),
    finish_reasons=finish_reasons,
    context_edits=context_edits,
    continues=continues,
)
