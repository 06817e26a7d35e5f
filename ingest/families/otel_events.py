"""The OpenTelemetry GenAI per-message events (v1.28 to v1.36): one log record (or span event) per input
message and one per choice, tied to the model-call span by its trace and span ids. Read only when the
span itself carries no messages (the later conventions put them on the span)."""

from ingest.families.base import Family, Read
from ingest.families.messages import Event, message, parse_json, parts_of, tool_call_parts, tool_response

EVENT_MESSAGE_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
EVENT_CHOICE = "gen_ai.choice"


def _event_messages(events: list[Event]) -> tuple[list[dict] | None, list[dict] | None]:
    """Input and output messages from the events."""
    inputs: list[dict] = []
    outputs: list[dict] = []
    for event in events:
        body = parse_json(event.body) if event.body is not None else event.attributes
        body = body if isinstance(body, dict) else {"content": body}
        if event.name in EVENT_MESSAGE_ROLES:
            role = body.get("role") or EVENT_MESSAGE_ROLES[event.name]
            parts = parts_of(body.get("content")) + tool_call_parts(body.get("tool_calls") or [])
            if event.name == "gen_ai.tool.message":
                parts = tool_response(body.get("id"), body.get("content"))
            inputs.append(message(role, parts))
        elif event.name == EVENT_CHOICE:
            said = (
                parse_json(body.get("message"))
                if isinstance(body.get("message"), str)
                else body.get("message")
            )
            # strands-agents: the message is its content blocks (a JSON list), not a message object.
            choice = said if isinstance(said, dict) else {"content": said} if isinstance(said, list) else {}
            parts = parts_of(choice.get("content")) + tool_call_parts(
                body.get("tool_calls") or choice.get("tool_calls") or []
            )
            output = message(choice.get("role") or "assistant", parts)
            if isinstance(body.get("finish_reason"), str) and body["finish_reason"]:
                output["finish_reason"] = body["finish_reason"]
            outputs.append(output)
    return inputs or None, outputs or None


def input_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    return _event_messages(events)[0], []


def output_messages(attributes: dict, content: dict, events: list[Event]) -> Read:
    return _event_messages(events)[1], []


FAMILY = Family(
    name="otel-genai-events",
    input_messages=input_messages,
    output_messages=output_messages,
    content_events=frozenset({EVENT_CHOICE, *EVENT_MESSAGE_ROLES}),
    content_log_events=frozenset({EVENT_CHOICE, *EVENT_MESSAGE_ROLES}),
)
