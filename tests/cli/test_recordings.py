"""What the coding-agent CLIs export, pinned on their recordings (tests/data/cli, see README.md here).

Each fact below is a function of one recording. The fixture tests check every fact on the committed
recordings (pure: no database, no network); ``test_a_fresh_recording_shows_the_same_facts`` records
each CLI again, end to end, and checks the same facts on the new recording, so a CLI upgrade or a
re-recording that changes the shape of the telemetry fails here, loudly, with the fact's name.
"""

from __future__ import annotations

import functools
import json
import re
from collections import Counter

import pytest

from tests.cli import live, record, view

CLAUDE_MODES = ["claude-code-default", "claude-code-traces", "claude-code-detailed"]
CLAUDE_TRACED = ["claude-code-traces", "claude-code-detailed"]
SUBAGENT_STEPS = {"sub-read", "sub-answer"}
CLAUDE_BODY_CUT = 61_440  # characters of api_request_body Claude Code keeps by default
CLAUDE_CUT_MARKER = "[TRUNCATED - Content exceeds 60KB limit]"
GEMINI_CUT = 10_000  # characters of a span attribute Gemini CLI keeps (truncateForTelemetry)
GEMINI_CUT_MARKER = re.compile(r"\.\.\.\[TRUNCATED: original length (\d+)\]$")


def by_request_id(records: list[dict], key: str = "request_id") -> dict[str, dict]:
    found: dict[str, dict] = {}
    for item in records:
        request_id = item["attributes"][key]
        assert request_id not in found, f"two records for {request_id}"
        found[request_id] = item
    return found


def js_length(text: str) -> int:
    """A JavaScript string's length: UTF-16 code units (an emoji counts two), as Claude Code counts."""
    return len(text.encode("utf-16-le")) // 2


def turn_of(step: str) -> int:
    """Which ``claude -p`` a scripted step belongs to: only the step named turn-2 is in the second."""
    return 2 if step == "turn-2" else 1


# ---------------------------------------------------------------------------------------------
# Every recording
# ---------------------------------------------------------------------------------------------
def recording_is_complete(doc: dict) -> None:
    """The CLI ran both turns cut off from the network, every scripted step was asked for exactly
    once, and every export decodes through ctxview's own decoder."""
    cli = record.CLIS[record.SCENARIOS[doc["scenario"]].cli]
    assert doc["problems"] == []
    assert doc["cli"]["version"] == cli.version and cli.version in doc["cli"]["version_output"]
    assert doc["network"].startswith("network namespace with loopback only")
    assert [turn["exit_code"] for turn in doc["turns"]] == [0, 0]
    steps = [request["step"] for request in doc["provider"]["requests"] if request["step"]]
    assert sorted(steps) == sorted(step["step"] for step in doc["provider"]["script"])
    assert all(export["error"] is None for export in doc["exports"])
    assert len(view.spans(doc)) + len(view.logs(doc)) > 0
    assert all(r["tools_sent"] for r in view.model_requests(doc) if r["step"])


def no_secret_is_recorded(doc: dict) -> None:
    """The fake API key never appears, not in the env, the config files or anything exported."""
    text = repr(doc)
    assert record.FAKE_KEY not in text
    keys = [name for name in doc["env"] if "KEY" in name]
    assert keys and all(doc["env"][name] == "$FAKE_KEY" for name in keys)


# ---------------------------------------------------------------------------------------------
# Claude Code
# ---------------------------------------------------------------------------------------------
def claude_api_request_logs_carry_the_fakes_exact_usage(doc: dict) -> None:
    """One ``api_request`` log record per model request, joined by ``request_id`` (the response's
    request-id header); ``input_tokens`` is the uncached input, cache figures are separate."""
    logs = by_request_id(view.named(view.logs(doc), "api_request"))
    requests = view.model_requests(doc)
    assert set(logs) == {r["request_id"] for r in requests}
    for request in requests:
        usage, attributes = request["usage"], logs[request["request_id"]]["attributes"]
        assert logs[request["request_id"]]["body"] == "claude_code.api_request"
        assert attributes["model"] == request["model"]
        expected = {
            "input_tokens": usage["input_tokens"],
            "cache_read_tokens": usage["cache_read_input_tokens"],
            "cache_creation_tokens": usage["cache_creation_input_tokens"],
            "cache_creation_5m_tokens": usage["cache_creation"]["ephemeral_5m_input_tokens"],
            "cache_creation_1h_tokens": usage["cache_creation"]["ephemeral_1h_input_tokens"],
            "output_tokens": usage["output_tokens"],
        }
        assert {name: attributes[name] for name in expected} == expected
        assert attributes["cost_usd"] > 0 and isinstance(attributes["cost_usd_micros"], int)


def claude_subagent_requests_carry_the_agent_id(doc: dict) -> None:
    """The subagent's requests carry ``agent_id`` and ``query_source=agent:…``; the main agent's carry
    neither; one ``subagent_completed`` record names the same agent id."""
    logs = by_request_id(view.named(view.logs(doc), "api_request"))
    steps = view.scripted(doc)
    agent_ids = {logs[steps[s]["request_id"]]["attributes"].get("agent_id") for s in SUBAGENT_STEPS}
    assert len(agent_ids) == 1 and None not in agent_ids
    for step, request in steps.items():
        attributes = logs[request["request_id"]]["attributes"]
        if step in SUBAGENT_STEPS:
            assert attributes["query_source"].startswith("agent:")
        else:
            assert "agent_id" not in attributes and attributes["query_source"] == "sdk"
    completed = view.named(view.logs(doc), "subagent_completed")
    assert [r["attributes"]["agent_id"] for r in completed] == list(agent_ids)


def claude_one_session_one_prompt_id_per_turn(doc: dict) -> None:
    """``--continue`` keeps ``session.id``; each turn (each ``claude -p``) has its own ``prompt.id``,
    shared by the subagent's requests of that turn."""
    logs = by_request_id(view.named(view.logs(doc), "api_request"))
    prompt_ids: dict[int, set] = {1: set(), 2: set()}
    for step, request in view.scripted(doc).items():
        prompt_ids[turn_of(step)].add(logs[request["request_id"]]["attributes"]["prompt.id"])
    assert len(prompt_ids[1]) == len(prompt_ids[2]) == 1 and prompt_ids[1] != prompt_ids[2]
    assert len({r["attributes"]["session.id"] for r in logs.values()}) == 1


def claude_default_exports_logs_only_unlinked(doc: dict) -> None:
    """Without a traces exporter: OTLP/HTTP protobuf log exports only, and no trace or span ids."""
    assert {e["signal"] for e in doc["exports"]} == {"logs"}
    assert {e["content_type"] for e in doc["exports"]} == {"application/x-protobuf"}
    assert all(r["trace_id"] == "" and r["span_id"] == "" for r in view.logs(doc))


def claude_llm_request_spans_carry_inclusive_usage(doc: dict) -> None:
    """One ``claude_code.llm_request`` span per request (joined by ``request_id``; its
    ``gen_ai.response.id`` is that request id, not the message id): ``gen_ai.usage.input_tokens``
    includes both cache buckets, the legacy ``input_tokens`` does not."""
    spans = by_request_id(view.named(view.spans(doc), "claude_code.llm_request"))
    requests = view.model_requests(doc)
    assert set(spans) == {r["request_id"] for r in requests}
    for request in requests:
        usage, attributes = request["usage"], spans[request["request_id"]]["attributes"]
        read, write = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.response.id"] == request["request_id"] != request["response_id"]
        assert attributes["gen_ai.request.model"] == request["model"]
        assert attributes["gen_ai.usage.input_tokens"] == usage["input_tokens"] + read + write
        assert attributes["input_tokens"] == usage["input_tokens"]
        assert attributes["gen_ai.usage.cache_read.input_tokens"] == read
        assert attributes["gen_ai.usage.cache_write.input_tokens"] == write
        assert attributes["gen_ai.usage.output_tokens"] == usage["output_tokens"]


def claude_spans_nest_subagents_under_the_agent_tool(doc: dict) -> None:
    """Each turn is one trace rooted at ``claude_code.interaction``; the main agent's requests are its
    children; the subagent's hang under the Agent tool's ``claude_code.tool.execution`` and carry the
    agent id as ``gen_ai.conversation.id`` (the main agent's is the session id)."""
    all_spans = view.spans(doc)
    by_id = {span["span_id"]: span for span in all_spans}
    interactions = view.named(all_spans, "claude_code.interaction")
    assert len(interactions) == 2 and all(span["parent_span_id"] == "" for span in interactions)
    assert len({span["trace_id"] for span in interactions}) == 2
    logs = by_request_id(view.named(view.logs(doc), "api_request"))
    spans = by_request_id(view.named(all_spans, "claude_code.llm_request"))
    for step, request in view.scripted(doc).items():
        span, log = spans[request["request_id"]], logs[request["request_id"]]
        parent = by_id[span["parent_span_id"]]
        if step in SUBAGENT_STEPS:
            assert parent["name"] == "claude_code.tool.execution"
            assert parent["attributes"]["tool_use_id"] == "toolu_fake_agent_1"
            assert span["attributes"]["gen_ai.conversation.id"] == log["attributes"]["agent_id"]
            assert span["attributes"]["llm_request.context"] == "tool"
        else:
            assert parent["name"] == "claude_code.interaction"
            assert span["attributes"]["gen_ai.conversation.id"] == log["attributes"]["session.id"]
            assert span["attributes"]["llm_request.context"] == "interaction"
        # The log record is in the span's trace but points at the span's parent, not at the span.
        assert (log["trace_id"], log["span_id"]) == (span["trace_id"], span["parent_span_id"])


def claude_traces_mode_sends_protobuf(doc: dict) -> None:
    assert {e["signal"] for e in doc["exports"]} == {"logs", "traces"}
    assert {e["content_type"] for e in doc["exports"]} == {"application/x-protobuf"}


def claude_detailed_mode_sends_otlp_json_with_content(doc: dict) -> None:
    """Beta detailed tracing sends both signals as OTLP/JSON, and puts the new context of each request
    and its system reminders on the span; a turn's first request starts with the user's prompt."""
    assert {e["content_type"] for e in doc["exports"]} == {"application/json"}
    spans = by_request_id(view.named(view.spans(doc), "claude_code.llm_request"))
    prompts = {"main-read": record.PROMPT_1, "sub-read": record.SUBAGENT_PROMPT, "turn-2": record.PROMPT_2}
    for step, request in view.scripted(doc).items():
        attributes = spans[request["request_id"]]["attributes"]
        assert attributes["new_context_message_count"] >= 1
        assert attributes["system_prompt_hash"].startswith("sp_")
        if step in ("main-read", "sub-read"):
            assert attributes["new_context"] == f"[USER]\n{prompts[step]}"
        if step == "turn-2":  # a new process: everything is new context, the prompt comes last
            assert attributes["new_context"].endswith(f"[USER]\n{record.PROMPT_2}")
        if step.endswith("answer"):
            assert attributes["new_context"].startswith("[TOOL RESULT: toolu_fake_")


def claude_detailed_mode_sends_each_system_prompt_once_per_process(doc: dict) -> None:
    """A ``system_prompt`` record per distinct hash per process (turn), holding the whole prompt whose
    hash the spans name; ``tool`` records likewise, one per tool definition."""
    logs, spans = view.logs(doc), view.named(view.spans(doc), "claude_code.llm_request")
    prompts = view.named(logs, "system_prompt")
    seen = Counter((r["trace_id"], r["attributes"]["system_prompt_hash"]) for r in prompts)
    assert set(seen.values()) == {1}
    assert {(s["trace_id"], s["attributes"]["system_prompt_hash"]) for s in spans} == set(seen)
    for prompt in prompts:
        text = prompt["attributes"]["system_prompt"]
        assert js_length(text) == int(prompt["attributes"]["system_prompt_length"])
    tools = view.named(logs, "tool")
    per_trace = Counter(r["trace_id"] for r in tools)
    assert set(per_trace.values()) == {spans[0]["attributes"]["tools_count"]}
    assert all(r["attributes"]["tool"].startswith('{"name":') for r in tools)


def claude_detailed_mode_cuts_raw_bodies_at_61440(doc: dict) -> None:
    """``api_request_body`` keeps 61,440 characters (marker included) and says the full length in
    ``body_length``, both counted in UTF-16 code units; ``api_response_body`` names the request id
    and the message id."""
    bodies = view.named(view.logs(doc), "api_request_body")
    assert len(bodies) == len(view.model_requests(doc))
    cut = [r for r in bodies if int(r["attributes"]["body_length"]) > CLAUDE_BODY_CUT]
    assert cut, "no request body was long enough to be cut; the recording no longer tests the cut"
    for body in bodies:
        text, length = body["attributes"]["body"], int(body["attributes"]["body_length"])
        if length > CLAUDE_BODY_CUT:
            assert js_length(text) == CLAUDE_BODY_CUT and text.endswith(CLAUDE_CUT_MARKER)
        else:
            assert js_length(text) == length and text.startswith('{"model":')
    responses = by_request_id(view.named(view.logs(doc), "api_response_body"))
    for request in view.model_requests(doc):
        assert responses[request["request_id"]]["attributes"]["message.id"] == request["response_id"]


# ---------------------------------------------------------------------------------------------
# Codex CLI
# ---------------------------------------------------------------------------------------------
def codex_completed(doc: dict) -> list[dict]:
    return [
        r
        for r in view.named(view.logs(doc), "codex.sse_event")
        if r["attributes"]["event.kind"] == "response.completed" and "input_token_count" in r["attributes"]
    ]


def codex_response_completed_logs_carry_the_fakes_usage(doc: dict) -> None:
    """Per request one ``codex.sse_event`` (``event.kind=response.completed``) with the figures,
    input including cached and cache-written tokens, and a second one without any; no trace ids.
    The counts come as a mix of strings and integers."""
    requests = view.model_requests(doc)
    completed = codex_completed(doc)
    assert len(completed) == len(requests)
    for request, log in zip(requests, completed, strict=True):
        usage, attributes = request["usage"], log["attributes"]
        assert (log["trace_id"], log["span_id"]) == ("", "")
        assert isinstance(attributes["input_token_count"], str)
        assert isinstance(attributes["cached_token_count"], int)
        expected = {
            "input_token_count": usage["input_tokens"],
            "cached_token_count": usage["input_tokens_details"]["cached_tokens"],
            "cache_write_token_count": usage["input_tokens_details"]["cache_write_tokens"],
            "output_token_count": usage["output_tokens"],
            "reasoning_token_count": usage["output_tokens_details"]["reasoning_tokens"],
        }
        assert {name: int(attributes[name]) for name in expected} == expected
        assert attributes["model"] == request["model"]
    bare = [
        r
        for r in view.named(view.logs(doc), "codex.sse_event")
        if r["attributes"]["event.kind"] == "response.completed"
        and "input_token_count" not in r["attributes"]
    ]
    assert len(bare) == len(requests)


def codex_handle_responses_spans_carry_usage_without_model(doc: dict) -> None:
    """Exactly one ``handle_responses`` span per request has ``gen_ai.usage.*`` (input inclusive),
    with no operation name and no model; its ancestor ``try_run_sampling_request`` has the model and
    ``turn_id``, and that span's ``codex.sampling`` child the conversation id."""
    all_spans = view.spans(doc)
    by_id = {span["span_id"]: span for span in all_spans}
    with_usage = [s for s in all_spans if "gen_ai.usage.input_tokens" in s["attributes"]]
    requests = view.model_requests(doc)
    assert len(with_usage) == len(requests)
    assert len(view.named(all_spans, "handle_responses")) > len(requests)
    conversation = {r["attributes"]["conversation.id"] for r in codex_completed(doc)}
    assert len(conversation) == 1  # resume keeps the conversation
    turn_ids = set()
    for request, span in zip(
        requests, sorted(with_usage, key=lambda s: s["start_time_unix_nano"]), strict=True
    ):
        usage, attributes = request["usage"], span["attributes"]
        assert span["name"] == "handle_responses"
        assert "gen_ai.operation.name" not in attributes and "model" not in attributes
        assert attributes["gen_ai.usage.input_tokens"] == usage["input_tokens"]
        assert (
            attributes["gen_ai.usage.cache_read.input_tokens"]
            == usage["input_tokens_details"]["cached_tokens"]
        )
        assert (
            attributes["gen_ai.usage.cache_write.input_tokens"]
            == usage["input_tokens_details"]["cache_write_tokens"]
        )
        assert attributes["gen_ai.usage.output_tokens"] == usage["output_tokens"]
        sampling = by_id[span["parent_span_id"]]
        while sampling["name"] != "try_run_sampling_request":
            sampling = by_id[sampling["parent_span_id"]]
        assert sampling["attributes"]["model"] == request["model"]
        children = [
            s
            for s in all_spans
            if s["parent_span_id"] == sampling["span_id"] and s["name"] == "codex.sampling"
        ]
        assert [c["attributes"]["turn.id"] for c in children] == [sampling["attributes"]["turn_id"]]
        assert {c["attributes"]["conversation.id"] for c in children} == conversation
        turn_ids.add(sampling["attributes"]["turn_id"])
    assert len(turn_ids) == 2
    assert len(all_spans) > 10 * len(requests)  # hundreds of internal spans around a few model calls


def codex_json_sends_otlp_json(doc: dict) -> None:
    """``protocol = "json"`` switches both exporters to OTLP/JSON, which ctxview decodes as is."""
    assert {e["content_type"] for e in doc["exports"]} == {"application/json"}


def codex_propagates_trace_context_to_the_provider(doc: dict) -> None:
    """Codex sends ``traceparent`` to the model API: its span is the request's transport span, the one
    the ``codex.api_request`` log record points at, in the trace of the request's usage span."""
    all_spans = view.spans(doc)
    by_id = {span["span_id"]: span for span in all_spans}
    api_logs = {r["span_id"]: r for r in view.named(view.logs(doc), "codex.api_request")}
    for request in view.model_requests(doc):
        _, trace_id, span_id, _ = request["traceparent"].split("-")
        assert by_id[span_id]["trace_id"] == trace_id and span_id in api_logs


# ---------------------------------------------------------------------------------------------
# Gemini CLI
# ---------------------------------------------------------------------------------------------
def gemini_api_response_logs_carry_the_fakes_usage(doc: dict) -> None:
    """One ``gemini_cli.api_response`` per request, in order, without trace ids: input includes
    cached content, output excludes thoughts (both as the API reports them)."""
    requests = view.model_requests(doc)
    responses = view.named(view.logs(doc), "gemini_cli.api_response")
    assert len(responses) == len(requests)
    for request, log in zip(requests, responses, strict=True):
        usage, attributes = request["usage"], log["attributes"]
        assert (log["trace_id"], log["span_id"]) == ("", "")
        assert attributes["model"] == request["model"]
        expected = {
            "input_token_count": usage["promptTokenCount"],
            "cached_content_token_count": usage["cachedContentTokenCount"],
            "output_token_count": usage["candidatesTokenCount"],
            "thoughts_token_count": usage["thoughtsTokenCount"],
            "total_token_count": usage["totalTokenCount"],
        }
        assert {name: attributes[name] for name in expected} == expected


def gemini_llm_call_spans_are_roots(doc: dict) -> None:
    """One ``llm_call`` span per request, each the root of its own trace, with the system instructions
    and tool definitions; the ``api_request`` log record points at it."""
    spans = view.named(view.spans(doc), "llm_call")
    requests = view.model_requests(doc)
    assert len(spans) == len(requests) == len({s["trace_id"] for s in spans})
    for span in spans:
        attributes = span["attributes"]
        assert span["parent_span_id"] == "" and attributes["gen_ai.operation.name"] == "llm_call"
        assert attributes["gen_ai.system_instructions"] and attributes["gen_ai.tool.definitions"]
        assert attributes["gen_ai.request.model"] == requests[0]["model"]
    requested = view.named(view.logs(doc), "gemini_cli.api_request")
    assert [(r["trace_id"], r["span_id"]) for r in requested] == [
        (s["trace_id"], s["span_id"]) for s in spans
    ]


def gemini_llm_call_spans_carry_no_usage_without_traces(doc: dict) -> None:
    """Without ``telemetry.traces`` the spans carry no usage and no messages."""
    for span in view.named(view.spans(doc), "llm_call"):
        assert not [name for name in span["attributes"] if name.startswith("gen_ai.usage.")]
        assert "gen_ai.input.messages" not in span["attributes"]


def gemini_llm_call_spans_carry_usage_and_messages_with_traces(doc: dict) -> None:
    """With ``telemetry.traces``: input (including cached) and output (without thoughts) tokens, no
    cache figure; input and output messages, cut to 10,000 characters plus a marker with the length."""
    spans = view.named(view.spans(doc), "llm_call")
    cut = 0
    for request, span in zip(view.model_requests(doc), spans, strict=True):
        attributes = span["attributes"]
        assert attributes["gen_ai.usage.input_tokens"] == request["usage"]["promptTokenCount"]
        assert attributes["gen_ai.usage.output_tokens"] == request["usage"]["candidatesTokenCount"]
        assert sorted(n for n in attributes if n.startswith("gen_ai.usage.")) == [
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.output_tokens",
        ]
        for name in ("gen_ai.input.messages", "gen_ai.output.messages"):
            text = attributes[name]
            marker = GEMINI_CUT_MARKER.search(text)
            if marker:
                cut += 1
                assert len(text) == GEMINI_CUT + len(marker.group(0)) and int(marker.group(1)) > GEMINI_CUT
            else:
                assert json.loads(text)[0]["role"] in ("user", "model")
    assert cut, "no message was long enough to be cut; the recording no longer tests the cut"


def gemini_prompt_id_does_not_tell_calls_apart(doc: dict) -> None:
    """``prompt_id`` is the session id for every call, across both turns: an ``api_response`` pairs
    with its ``llm_call`` span by order (the n-th ``api_request`` of a prompt id points at the span)."""
    logs = view.logs(doc)
    responses = view.named(logs, "gemini_cli.api_response")
    requested = view.named(logs, "gemini_cli.api_request")
    prompt_ids = {r["attributes"]["prompt_id"] for r in responses + requested}
    assert prompt_ids == {r["attributes"]["session.id"] for r in responses}
    assert len(prompt_ids) == 1 and len(responses) > 1


def gemini_operation_details_logs_repeat_usage(doc: dict) -> None:
    """A ``gen_ai.client.inference.operation.details`` pair per request: the first linked to the
    ``llm_call`` span, the second (unlinked) with ``gen_ai.response.id`` and inclusive input,
    output without thoughts; ``server.address`` is Google's even with a custom base URL."""
    details = view.named(view.logs(doc), "gen_ai.client.inference.operation.details")
    finished = [r for r in details if "gen_ai.response.id" in r["attributes"]]
    requests = view.model_requests(doc)
    assert len(details) == 2 * len(requests) and len(finished) == len(requests)
    for request, log in zip(requests, finished, strict=True):
        attributes = log["attributes"]
        assert attributes["gen_ai.response.id"] == request["response_id"]
        assert attributes["gen_ai.usage.input_tokens"] == request["usage"]["promptTokenCount"]
        assert attributes["gen_ai.usage.output_tokens"] == request["usage"]["candidatesTokenCount"]
        assert attributes["server.address"] == "generativelanguage.googleapis.com"


def gemini_resource_names_node_not_the_cli(doc: dict) -> None:
    """``service.version`` is the Node.js version; only the OTLP/JSON encoding is used."""
    resource = view.spans(doc)[0]["resource"]
    assert resource["service.name"] == "gemini-cli" and resource["service.version"].startswith("v")
    assert {e["content_type"] for e in doc["exports"]} == {"application/json"}


FACTS = {
    "claude-code-default": [claude_default_exports_logs_only_unlinked],
    "claude-code-traces": [claude_traces_mode_sends_protobuf],
    "claude-code-detailed": [
        claude_detailed_mode_sends_otlp_json_with_content,
        claude_detailed_mode_sends_each_system_prompt_once_per_process,
        claude_detailed_mode_cuts_raw_bodies_at_61440,
    ],
    "codex": [
        codex_response_completed_logs_carry_the_fakes_usage,
        codex_handle_responses_spans_carry_usage_without_model,
        codex_propagates_trace_context_to_the_provider,
    ],
    "codex-json": [
        codex_response_completed_logs_carry_the_fakes_usage,
        codex_handle_responses_spans_carry_usage_without_model,
        codex_propagates_trace_context_to_the_provider,
        codex_json_sends_otlp_json,
    ],
    "gemini-cli": [gemini_llm_call_spans_carry_no_usage_without_traces],
    "gemini-cli-traces": [gemini_llm_call_spans_carry_usage_and_messages_with_traces],
}
for _name in CLAUDE_MODES:
    FACTS[_name] = [
        claude_api_request_logs_carry_the_fakes_exact_usage,
        claude_subagent_requests_carry_the_agent_id,
        claude_one_session_one_prompt_id_per_turn,
        *FACTS[_name],
    ]
for _name in ("gemini-cli", "gemini-cli-traces"):
    FACTS[_name] = [
        gemini_api_response_logs_carry_the_fakes_usage,
        gemini_llm_call_spans_are_roots,
        gemini_prompt_id_does_not_tell_calls_apart,
        gemini_operation_details_logs_repeat_usage,
        gemini_resource_names_node_not_the_cli,
        *FACTS[_name],
    ]
for _name in CLAUDE_TRACED:
    FACTS[_name] += [
        claude_llm_request_spans_carry_inclusive_usage,
        claude_spans_nest_subagents_under_the_agent_tool,
    ]
for _name in FACTS:
    FACTS[_name] = [recording_is_complete, no_secret_is_recorded, *FACTS[_name]]


@functools.cache
def committed(scenario: str) -> dict:
    """A committed recording, read once per test session (the facts only read it)."""
    return view.load(scenario)


CASES = [(scenario, fact) for scenario, facts in FACTS.items() for fact in facts]


def test_every_scenario_has_facts_and_a_recording():
    assert set(FACTS) == set(record.SCENARIOS)
    assert sorted(path.stem for path in view.FIXTURES.glob("*.json")) == sorted(record.SCENARIOS)


@pytest.mark.parametrize(("scenario", "fact"), CASES, ids=[f"{s}:{f.__name__}" for s, f in CASES])
def test_the_recording_shows(scenario, fact):
    fact(committed(scenario))


# ---------------------------------------------------------------------------------------------
# End to end: the real CLIs, installed from npm, recorded again
# ---------------------------------------------------------------------------------------------
# One scenario per CLI keeps the run short; the Claude Code and Gemini ones cover the most.
E2E = ["claude-code-detailed", "codex", "gemini-cli-traces"]


@pytest.mark.cli
@pytest.mark.parametrize("scenario", E2E)
def test_a_fresh_recording_shows_the_same_facts(scenario, tmp_path):
    """Needs node, npm and the npm registry (the install is cached in .cache/cli), and root or user
    namespaces for ``unshare -n``. Skipped otherwise, with the reason; required (failing instead)
    when CTXVIEW_REQUIRE_INSTRUMENTED=1, as in CI."""
    live.require(record.CLIS[record.SCENARIOS[scenario].cli])
    record.run_isolated(scenario, tmp_path)
    document = view.load(scenario, tmp_path)
    for fact in FACTS[scenario]:
        fact(document)
