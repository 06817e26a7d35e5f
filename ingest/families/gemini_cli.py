"""Gemini CLI's own telemetry (verified on 0.61.0, tests/cli/README.md). No Django here.

Each model request makes one ``llm_call`` span (the root of its own trace) with the system
instructions and the tool declarations, and one ``gemini_cli.api_response`` log record with the usage
(input *including* cached tokens, ``cached_content_token_count``, output *without* thoughts) that is not
linked to the span. ``prompt_id`` equals the session id for every call, so it cannot pair them: the
n-th response of the session goes with its n-th ``llm_call``. A turn starts at each
``gemini_cli.user_prompt``. Request messages are cut to 10,000 characters, so they are not items.
"""

import json

from ctxcore.vocabulary import count_of
from ingest.families.base import Family, SessionCall, Sessions, session_row, synthetic_id
from ingest.families.messages import parse_json

NAME = "gemini_cli"
LLM_CALL = "llm_call"
API_RESPONSE = "gemini_cli.api_response"
USER_PROMPT = "gemini_cli.user_prompt"
SESSION_ID = "session.id"
CONVERSATION_ID = "gen_ai.conversation.id"
EVENT_NAME = "event.name"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
CALL_NAME = "gemini_cli.llm_call"


def declarations(value) -> list[dict] | None:
    """Gemini's ``[{functionDeclarations: [...]}]`` as one definition per tool."""
    value = parse_json(value)
    if not isinstance(value, list):
        return None
    found = []
    for entry in value:
        if isinstance(entry, dict) and isinstance(entry.get("functionDeclarations"), list):
            found.extend(tool for tool in entry["functionDeclarations"] if isinstance(tool, dict))
        elif isinstance(entry, dict):
            found.append(entry)
    return found


def assemble(spans: list[dict], logs: list[dict]) -> list[SessionCall]:
    """The session's model requests: the n-th api_response with the n-th llm_call span."""
    calls_spans = sorted(
        (span for span in spans if span["name"] == LLM_CALL),
        key=lambda span: (span["start_time_unix_nano"], span["span_id"]),
    )
    ordered = sorted(logs, key=lambda log: (log["time_unix_nano"], log.get("observed_time_unix_nano", 0)))
    responses = [log for log in ordered if log["attributes"].get(EVENT_NAME) == API_RESPONSE]
    prompts = [log["time_unix_nano"] for log in ordered if log["attributes"].get(EVENT_NAME) == USER_PROMPT]
    calls = []
    for index in range(max(len(calls_spans), len(responses))):
        span = calls_spans[index] if index < len(calls_spans) else None
        response = responses[index] if index < len(responses) else None
        span_attributes = span["attributes"] if span else {}
        log_attributes = response["attributes"] if response else {}
        session = str(log_attributes.get(SESSION_ID) or span_attributes.get(CONVERSATION_ID) or "")
        model = log_attributes.get("model") or span_attributes.get("gen_ai.request.model") or ""
        attributes: dict = {
            SESSION_ID: session,
            "gen_ai.provider.name": "gcp.gen_ai",
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": str(model),
            "gen_ai.agent.name": str(span_attributes.get("gen_ai.agent.name") or ""),
        }
        reported: dict = {}
        if response:
            figures = {
                name: count_of(log_attributes.get(name))
                for name in (
                    "input_token_count",
                    "cached_content_token_count",
                    "output_token_count",
                    "thoughts_token_count",
                )
            }
            reported = {name: value for name, value in figures.items() if value is not None}
            thoughts = figures["thoughts_token_count"] or 0
            output = figures["output_token_count"]
            attributes.update(
                {
                    "gen_ai.usage.input_tokens": figures["input_token_count"],
                    "gen_ai.usage.cache_read.input_tokens": figures["cached_content_token_count"],
                    # Gemini bills thoughts as output; ctxview's output includes reasoning.
                    "gen_ai.usage.output_tokens": output + thoughts if output is not None else None,
                    "gen_ai.usage.reasoning.output_tokens": figures["thoughts_token_count"],
                }
            )
            if isinstance(log_attributes.get("finish_reasons"), list):
                attributes["gen_ai.response.finish_reasons"] = log_attributes["finish_reasons"]
        else:  # telemetry.traces: the span's figures, without the cached part
            for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"):
                if key in span_attributes:
                    attributes[key] = span_attributes[key]
        if SYSTEM_INSTRUCTIONS in span_attributes:
            attributes[SYSTEM_INSTRUCTIONS] = span_attributes[SYSTEM_INSTRUCTIONS]
        tools = declarations(span_attributes.get(TOOL_DEFINITIONS))
        if tools is not None:
            attributes[TOOL_DEFINITIONS] = json.dumps(tools)
        attributes = {key: value for key, value in attributes.items() if value not in (None, "")}

        if span:
            trace_id, identity = span["trace_id"], span["span_id"]
            start_ns, end_ns = span["start_time_unix_nano"], span["end_time_unix_nano"]
        else:
            trace_id, identity = synthetic_id(32, NAME, session), str(response["time_unix_nano"])
            duration = count_of(log_attributes.get("duration_ms")) or 0
            start_ns, end_ns = response["time_unix_nano"] - duration * 1_000_000, response["time_unix_nano"]
        turn = max((time for time in prompts if time <= start_ns), default=None)
        row = session_row(
            trace_id, synthetic_id(16, NAME, session, identity), CALL_NAME, start_ns, end_ns, attributes
        )
        calls.append(SessionCall(row, (span or response)["resource"], str(turn or ""), reported))
    return calls


SESSIONS = Sessions(
    log_key=SESSION_ID,
    span_key=CONVERSATION_ID,
    log_events=frozenset({API_RESPONSE, USER_PROMPT}),
    span_names=frozenset({LLM_CALL}),
    assemble=assemble,
    call_names=frozenset({CALL_NAME}),
    prompt_event=USER_PROMPT,  # (no prompt attribute unless logPrompts is on)
    no_content_note="Gemini CLI's llm_call span carries the system instructions and tool declarations",
)


def claims_span(name: str, attributes: dict) -> bool:
    return name == LLM_CALL and attributes.get("gen_ai.operation.name") == LLM_CALL


FAMILY = Family(
    name="gemini-cli",
    sessions=SESSIONS,
    claims_span=claims_span,
    other_content_keys=("gen_ai.input.messages", "gen_ai.output.messages"),
    log_content_keys=("prompt", "request_text", "response_text", "function_args"),
)
