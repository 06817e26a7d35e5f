"""Claude Code's own telemetry (verified on 2.1.332, tests/cli/README.md). No Django here.

Every model request logs one ``api_request`` record (usage with cache reads and 5m/1h writes, the cost
as Claude Code computed it, ``session.id``, ``prompt.id`` = the turn, ``agent_id`` for a subagent); with
traces on, one ``claude_code.llm_request`` span too (the same request: its ``request_id``). A call is
born from whichever arrives and is completed by the other. In detailed mode the span carries the
request's additions (``new_context``), its system prompt hash and tool hashes, and ``system_prompt`` /
``tool`` log records carry the texts once per process: the window is rebuilt from them per agent. With
``OTEL_LOG_RAW_API_BODIES`` the request body itself is logged (cut at 60 KB): when every request of an
agent has its whole body, that agent's windows are read from the bodies, which are exact (one source per
agent, so a cut body never puts two readings of one prefix side by side).
"""

import json
from dataclasses import dataclass, field

from ctxcore.vocabulary import count_of
from ingest.families.base import Family, SessionCall, Sessions, session_row, synthetic_id
from ingest.families.messages import block_part, parse_json, parts_of

NAME = "claude_code"
LLM_REQUEST = "claude_code.llm_request"
API_REQUEST = "api_request"
REQUEST_BODY = "api_request_body"
RESPONSE_BODY = "api_response_body"
SYSTEM_PROMPT = "system_prompt"
TOOL = "tool"
CALL_NAME = "claude_code.request"
USER_PROMPT = "user_prompt"
PROMPT_WITHHELD = "<REDACTED>"  # its prompt unless OTEL_LOG_USER_PROMPTS is set

SESSION_ID = "session.id"
EVENT_NAME = "event.name"

# Detailed mode's content: on the span and on its log records (hash-only projects drop them all).
SPAN_CONTENT_KEYS = (
    "new_context",
    "system_prompt_preview",
    "system_reminders",
    "response.model_output",
    "tools",
)
LOG_CONTENT_KEYS = ("system_prompt", "tool", "body", "prompt", "tool_input", "tool_parameters")

# new_context joins the request's new messages with this line; each starts with a [ROLE] header.
_SEPARATOR = "\n\n---\n\n"
_TOOL_RESULT = "[TOOL RESULT: "


def claims_span(name: str, attributes: dict) -> bool:
    return name == LLM_REQUEST


def new_messages(text: str) -> list[dict]:
    """``new_context`` as OTel messages: ``[USER]`` blocks and ``[TOOL RESULT: id]`` blocks."""
    messages = []
    for block in text.split(_SEPARATOR) if text else []:
        header, _, content = block.partition("\n")
        if header.startswith(_TOOL_RESULT) and header.endswith("]"):
            call_id = header[len(_TOOL_RESULT) : -1]
            part = {"type": "tool_call_response", "id": call_id, "response": content}
            messages.append({"role": "tool", "parts": [part]})
        elif header == "[USER]":
            messages.append({"role": "user", "parts": [{"type": "text", "content": content}]})
        else:  # a header this version does not know: keep the block whole
            messages.append({"role": "user", "parts": [{"type": "text", "content": block}]})
    return messages


def _extend(history: list[dict], new: list[dict]) -> list[dict]:
    """The agent's messages after a request: a resumed process sends the whole history as new again."""
    if history and new[: len(history)] == history:
        return new
    return history + new


def _tool_hashes(value) -> list[tuple[str, str]]:
    value = parse_json(value)
    if not isinstance(value, list):
        return []
    return [(str(e.get("name")), str(e.get("hash"))) for e in value if isinstance(e, dict) and e.get("name")]


def _parsed_body(attributes: dict) -> dict | None:
    """The logged request body, parsed (None: not loaded, cut, or not a Messages request)."""
    body = parse_json(attributes.get("body"))
    return body if isinstance(body, dict) and isinstance(body.get("messages"), list) else None


def body_window(body: dict) -> dict:
    """An Anthropic Messages request body as the OTel GenAI content attributes."""
    system = body.get("system")
    blocks = system if isinstance(system, list) else [system] if system else []
    messages = [
        {"role": str(entry.get("role") or "user"), "parts": parts_of(entry.get("content"))}
        for entry in body["messages"]
        if isinstance(entry, dict)
    ]
    content = {"gen_ai.input.messages": json.dumps(messages)}
    if blocks:
        content["gen_ai.system_instructions"] = json.dumps([block_part(block) for block in blocks])
    if isinstance(body.get("tools"), list):
        content["gen_ai.tool.definitions"] = json.dumps(body["tools"])
    return content


def assemble(spans: list[dict], logs: list[dict]) -> list[SessionCall]:
    """The session's model requests, each from its api_request record and/or its llm_request span."""
    found = _records(spans, logs)
    exact = _exact_agents(found)
    history: dict[str, list[dict]] = {}  # per agent: the messages sent so far (detailed mode)
    return [
        _session_call(request_id, entry, found, exact, history)
        for request_id, entry in sorted(found.requests.items(), key=lambda pair: (_start(pair[1]), pair[0]))
    ]


@dataclass
class _Records:
    """A session's records and spans, by what joins them."""

    requests: dict[str, dict] = field(default_factory=dict)  # request_id -> {"log": …, "span": …}
    prompts: dict[str, str] = field(default_factory=dict)  # system_prompt_hash -> the prompt
    tools: dict[str, dict] = field(default_factory=dict)  # tool_hash -> the definition
    whole: dict[str, bool] = field(default_factory=dict)  # request_body_id -> whether logged uncut
    bodies: dict[str, dict | None] = field(default_factory=dict)  # request_body_id -> parsed, where loaded
    body_of: dict[str, str] = field(default_factory=dict)  # request_id -> request_body_id


def _records(spans: list[dict], logs: list[dict]) -> _Records:
    found = _Records()
    for log in logs:
        attributes = log["attributes"]
        event = attributes.get(EVENT_NAME)
        if event == REQUEST_BODY and attributes.get("request_body_id"):
            body_id = str(attributes["request_body_id"])
            found.whole[body_id] = str(attributes.get("body_truncated", "")).lower() != "true"
            found.bodies[body_id] = _parsed_body(attributes) if found.whole[body_id] else None
        elif event == RESPONSE_BODY and attributes.get("request_id") and attributes.get("request_body_id"):
            found.body_of[str(attributes["request_id"])] = str(attributes["request_body_id"])
        elif event == API_REQUEST and attributes.get("request_id"):
            found.requests.setdefault(str(attributes["request_id"]), {})["log"] = log
        elif event == SYSTEM_PROMPT and isinstance(attributes.get("system_prompt"), str):
            found.prompts[str(attributes.get("system_prompt_hash"))] = attributes["system_prompt"]
        elif event == TOOL and isinstance(parse_json(attributes.get("tool")), dict):
            found.tools[str(attributes.get("tool_hash"))] = parse_json(attributes["tool"])
    for span in spans:
        request_id = span["attributes"].get("request_id") or span["attributes"].get("gen_ai.response.id")
        if span["name"] == LLM_REQUEST and request_id:
            found.requests.setdefault(str(request_id), {})["span"] = span
    return found


def _start(entry: dict) -> int:
    if "span" in entry:
        return entry["span"]["start_time_unix_nano"]
    log = entry["log"]
    return log["time_unix_nano"] - (count_of(log["attributes"].get("duration_ms")) or 0) * 1_000_000


def _agent_of(entry: dict) -> str:
    found = [row["attributes"].get("agent_id") for row in (entry.get("log"), entry.get("span")) if row]
    return str(next((agent for agent in found if agent), ""))


def _exact_agents(found: _Records) -> dict[str, bool]:
    """Per agent: every request's body was logged uncut. Bodies of calls long before the batch are not
    loaded (``HEAVY_LOG_KEYS``): their flag says enough, and those calls are not made again."""
    exact: dict[str, bool] = {}
    for request_id, entry in found.requests.items():
        agent = _agent_of(entry)
        exact[agent] = exact.get(agent, True) and found.whole.get(found.body_of.get(request_id, ""), False)
    return exact


def _session_call(
    request_id: str, entry: dict, found: _Records, exact: dict[str, bool], history: dict[str, list[dict]]
) -> SessionCall:
    span, log = entry.get("span"), entry.get("log")
    span_attributes = span["attributes"] if span else {}
    log_attributes = log["attributes"] if log else {}
    agent_id = _agent_of(entry)
    session = str(log_attributes.get(SESSION_ID) or span_attributes.get(SESSION_ID) or "")
    trace_id = (span or log)["trace_id"] or synthetic_id(32, NAME, session)
    attributes = {
        SESSION_ID: session,
        "gen_ai.provider.name": "anthropic",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": str(log_attributes.get("model") or span_attributes.get("model") or ""),
        "gen_ai.response.id": request_id,
    }
    for key in ("gen_ai.response.model", "gen_ai.response.finish_reasons"):
        if key in span_attributes:
            attributes[key] = span_attributes[key]
    if agent_id:
        attributes["gen_ai.agent.name"] = str(log_attributes.get("agent.name") or agent_id)
    reported: dict = {}
    if log:
        usage, reported = _log_usage(log_attributes)
        attributes = {key: value for key, value in {**attributes, **usage}.items() if value is not None}
    else:  # the span's figures: input inclusive, no 5m/1h split
        for key in (
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_write.input_tokens",
            "gen_ai.usage.output_tokens",
        ):
            if key in span_attributes:
                attributes[key] = span_attributes[key]

    logged = found.bodies.get(found.body_of.get(request_id, ""))
    if exact.get(agent_id) and logged is not None:
        attributes.update(body_window(logged))
    elif "new_context" in span_attributes:
        attributes.update(_detailed_window(span_attributes, found, history.setdefault(agent_id, [])))

    if span:
        start_ns, end_ns = span["start_time_unix_nano"], span["end_time_unix_nano"]
    else:
        start_ns, end_ns = _start(entry), log["time_unix_nano"]
    # One trace per turn when traced (logs then carry it too); prompt.id otherwise.
    turn_key = (span or log)["trace_id"] or str(log_attributes.get("prompt.id") or "")
    row = session_row(
        trace_id, synthetic_id(16, NAME, session, request_id), CALL_NAME, start_ns, end_ns, attributes
    )
    return SessionCall(row, (span or log)["resource"], turn_key, reported)


def _log_usage(log_attributes: dict) -> tuple[dict, dict]:
    """The usage attributes from an api_request record, and its figures as reported. The record's figures
    are exclusive (uncached input) and split 5m/1h writes."""
    figures = {
        key: count_of(log_attributes.get(key))
        for key in (
            "input_tokens",
            "cache_read_tokens",
            "cache_creation_tokens",
            "cache_creation_5m_tokens",
            "cache_creation_1h_tokens",
            "output_tokens",
        )
    }
    uncached, read, write = (
        figures["input_tokens"],
        figures["cache_read_tokens"],
        figures["cache_creation_tokens"],
    )
    usage = {
        "gen_ai.usage.input_tokens": uncached + read + write if None not in (uncached, read, write) else None,
        "gen_ai.usage.cache_read.input_tokens": read,
        "gen_ai.usage.cache_write.input_tokens": write,
        "gen_ai.usage.output_tokens": figures["output_tokens"],
        # Anthropic's name for 1-hour writes: the cache analysis reads the TTL from it.
        "gen_ai.usage.cache_creation.ephemeral_1h_input_tokens": figures["cache_creation_1h_tokens"],
        "gen_ai.usage.cache_creation.ephemeral_5m_input_tokens": figures["cache_creation_5m_tokens"],
    }
    reported = {key: value for key, value in figures.items() if value is not None}
    cost = log_attributes.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        reported["cost_usd"] = cost
    return usage, reported


def _detailed_window(span_attributes: dict, found: _Records, history: list[dict]) -> dict:
    """Detailed mode: the window, rebuilt from the hashes the span names and the texts logged once;
    ``history`` (the agent's messages sent so far) is extended in place."""
    history[:] = _extend(history, new_messages(str(span_attributes["new_context"])))
    attributes = {"gen_ai.input.messages": json.dumps(history)}
    prompt = found.prompts.get(str(span_attributes.get("system_prompt_hash")))
    if prompt is not None:
        attributes["gen_ai.system_instructions"] = json.dumps(prompt)
    named = _tool_hashes(span_attributes.get("tools"))
    if named and all(tool_hash in found.tools for _, tool_hash in named):
        attributes["gen_ai.tool.definitions"] = json.dumps([found.tools[h] for _, h in named])
    output = span_attributes.get("response.model_output")
    if isinstance(output, str) and output:
        text = {"role": "assistant", "parts": [{"type": "text", "content": output}]}
        attributes["gen_ai.output.messages"] = json.dumps([text])
    return attributes


# The bodies are the bulk of a detailed session: for rows long before a batch, only these are read.
HEAVY_LOG_KEYS = {
    REQUEST_BODY: (EVENT_NAME, SESSION_ID, "request_body_id", "body_truncated"),
    RESPONSE_BODY: (EVENT_NAME, SESSION_ID, "request_id", "request_body_id"),
}

SESSIONS = Sessions(
    log_key=SESSION_ID,
    span_key=SESSION_ID,
    log_events=frozenset({API_REQUEST, SYSTEM_PROMPT, TOOL, REQUEST_BODY, RESPONSE_BODY}),
    span_names=frozenset({LLM_REQUEST}),
    assemble=assemble,
    call_names=frozenset({CALL_NAME}),
    heavy_log_keys=HEAVY_LOG_KEYS,
    prompt_event=USER_PROMPT,
    prompt_withheld=frozenset({PROMPT_WITHHELD}),
    no_content_note=(
        "Claude Code sends the window only in detailed mode (ENABLE_BETA_TRACING_DETAILED=1 with "
        "OTEL_TRACES_EXPORTER=otlp): usage and cost come from its api_request log records"
    ),
)

FAMILY = Family(
    name="claude-code",
    sessions=SESSIONS,
    claims_span=claims_span,
    other_content_keys=SPAN_CONTENT_KEYS,
    log_content_keys=LOG_CONTENT_KEYS,
)
