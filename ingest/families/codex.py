"""Codex CLI's own telemetry (verified on 0.171.0, tests/cli/README.md). No Django here.

Each model request logs a ``codex.sse_event`` record of kind ``response.completed`` with its figures
(no trace or span id): input *including* cached and cache-written tokens, cached, cache writes as
reported, output including reasoning, and the model; ``conversation.id`` names the session. A turn
starts at each ``codex.user_prompt``. Codex's hundreds of internal spans per turn are not read (no
family classifies them, so they cost one dictionary lookup each); the one span with usage repeats the
record's figures without a model.
"""

from ctxcore.vocabulary import count_of
from ingest.families.base import Family, SessionCall, Sessions, session_row, synthetic_id

NAME = "codex"
SSE_EVENT = "codex.sse_event"
USER_PROMPT = "codex.user_prompt"
PROMPT_WITHHELD = "[REDACTED]"  # its prompt unless log_user_prompt is set
COMPLETED = "response.completed"
CONVERSATION_ID = "conversation.id"
EVENT_NAME = "event.name"
CALL_NAME = "codex.response"

# The record's figure -> the OTel GenAI usage key it becomes (the figures come as strings or integers).
FIGURES = {
    "input_token_count": "gen_ai.usage.input_tokens",
    "cached_token_count": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_token_count": "gen_ai.usage.cache_write.input_tokens",
    "output_token_count": "gen_ai.usage.output_tokens",
    "reasoning_token_count": "gen_ai.usage.reasoning.output_tokens",
}


def _is_call(attributes: dict) -> bool:
    # Two records per response.completed: one with only its duration, one with the figures.
    return (
        attributes.get(EVENT_NAME) == SSE_EVENT
        and attributes.get("event.kind") == COMPLETED
        and count_of(attributes.get("input_token_count")) is not None
    )


def assemble(spans: list[dict], logs: list[dict]) -> list[SessionCall]:
    """The conversation's model requests, in order, each in the turn of the prompt before it."""
    ordered = sorted(logs, key=lambda log: (log["time_unix_nano"], log.get("observed_time_unix_nano", 0)))
    calls = []
    turn_key = ""
    for log in ordered:
        attributes = log["attributes"]
        if attributes.get(EVENT_NAME) == USER_PROMPT:
            turn_key = log["trace_id"] or str(log["time_unix_nano"])
            continue
        if not _is_call(attributes):
            continue
        conversation = str(attributes.get(CONVERSATION_ID) or "")
        figures = {name: count_of(attributes.get(name)) for name in FIGURES}
        call_attributes = {
            "gen_ai.conversation.id": conversation,
            "gen_ai.provider.name": "openai",  # the Responses API's usage semantics
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": str(attributes.get("model") or ""),
            **{FIGURES[name]: value for name, value in figures.items() if value is not None},
        }
        identity = [str(log["time_unix_nano"]), *(str(value) for value in figures.values())]
        time = log["time_unix_nano"]
        ttft = count_of(attributes.get("ttft_ms")) or 0
        row = session_row(
            synthetic_id(32, NAME, conversation),
            synthetic_id(16, NAME, conversation, *identity),
            CALL_NAME,
            time - ttft * 1_000_000,
            time,
            call_attributes,
        )
        reported = {name: value for name, value in figures.items() if value is not None}
        calls.append(SessionCall(row, log["resource"], turn_key, reported))
    return calls


SESSIONS = Sessions(
    log_key=CONVERSATION_ID,
    span_key=CONVERSATION_ID,
    log_events=frozenset({SSE_EVENT, USER_PROMPT}),
    span_names=frozenset(),
    assemble=assemble,
    call_names=frozenset({CALL_NAME}),
    prompt_event=USER_PROMPT,
    prompt_withheld=frozenset({PROMPT_WITHHELD}),
    no_content_note="Codex's telemetry carries usage, not the request's window",
)

FAMILY = Family(
    name="codex",
    sessions=SESSIONS,
    log_content_keys=("prompt", "arguments", "output"),
)
