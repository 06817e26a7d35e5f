"""The coding CLIs' families on their real recordings (tests/data/cli): pure, no database, no Node.

Every expected figure comes from the recording itself: the fake provider's log of what it answered.
"""

import json
import random
from collections import defaultdict

import pytest

from ctxcore.analysis import CallInput, analyse_call, new_state
from ingest import families, sessions, turns
from ingest.families import claude_code, codex, gemini_cli
from tests.cli import view

CLAUDE = ["claude-code-default", "claude-code-traces", "claude-code-detailed"]
SUBAGENT_STEPS = {"sub-read", "sub-answer"}


def family_of(name: str):
    return next(family for family in families.FAMILIES if family.name == name)


def session_rows(family, spans, logs) -> dict[str, tuple[list, list]]:
    found: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for span in spans:
        if (key := sessions.session_of(family, "spans", span)) is not None:
            found[key][0].append(span)
    for log in logs:
        if (key := sessions.session_of(family, "logs", log)) is not None:
            found[key][1].append(log)
    return dict(found)


def assembled(scenario: str, name: str, spans=None, logs=None):
    doc = view.load(scenario)
    spans = view.spans(doc) if spans is None else spans
    logs = view.logs(doc) if logs is None else logs
    by_session = session_rows(family_of(name), spans, logs)
    assert len(by_session) == 1, "one CLI session per recording (the second turn resumes the first)"
    (key, (session_spans, session_logs)), *_ = by_session.items()
    return doc, key, sessions.records(family_of(name), session_spans, session_logs)


def numbered(records) -> list[int]:
    """Turn numbers, as ingest gives them (the CLI's turn key is the call's fingerprint)."""
    state, found = turns.TurnState(), []
    for record in records:
        state = turns.advance(
            state,
            turn_hint=None,
            fingerprint=record.user_fingerprint,
            invocation=None,
            trace_id=record.trace_id,
        )
        found.append(state.turn)
    return found


def anthropic_usage(reported: dict) -> dict:
    uncached, write = reported["input_tokens"], reported["cache_creation_input_tokens"]
    read = reported["cache_read_input_tokens"]
    return {
        "uncached": uncached,
        "cache_write": write,
        "cache_read": read,
        "output": reported["output_tokens"],
        "reasoning": None,
        "prompt_total": uncached + write + read,
    }


# --- Claude Code -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", CLAUDE)
def test_claude_code_gives_one_call_per_request_with_the_providers_exact_usage(scenario):
    doc, key, records = assembled(scenario, "claude-code")
    requests = {request["request_id"]: request for request in view.model_requests(doc)}
    assert [record.response_id for record in records] == list(requests)  # in the order they were made
    for record in records:
        assert record.usage.to_dict() == anthropic_usage(requests[record.response_id]["usage"])
        assert record.run_key == key and record.model == requests[record.response_id]["model"]


@pytest.mark.parametrize("scenario", CLAUDE)
def test_claude_code_keeps_its_own_cost_and_the_one_hour_writes(scenario):
    doc, _, records = assembled(scenario, "claude-code")
    logs = {log["attributes"]["request_id"]: log for log in view.named(view.logs(doc), "api_request")}
    requests = {request["request_id"]: request for request in view.model_requests(doc)}
    for record in records:
        assert record.usage.raw["reported.cost_usd"] == logs[record.response_id]["attributes"]["cost_usd"]
        one_hour = requests[record.response_id]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"]
        assert record.usage.raw["gen_ai.usage.cache_creation.ephemeral_1h_input_tokens"] == one_hour


@pytest.mark.parametrize("scenario", CLAUDE)
def test_claude_code_subagent_calls_are_attributed_inside_the_session_and_its_turn(scenario):
    doc, _, records = assembled(scenario, "claude-code")
    steps = {request["request_id"]: request["step"] for request in view.model_requests(doc)}
    for record in records:
        expected = "general-purpose" if steps[record.response_id] in SUBAGENT_STEPS else ""
        assert record.agent_name == expected
    turn_of = dict(zip([record.response_id for record in records], numbered(records), strict=True))
    assert {step: turn_of[request_id] for request_id, step in steps.items()} == {
        "main-read": 1,
        "main-agent": 1,
        "sub-read": 1,
        "sub-answer": 1,
        "main-answer": 1,
        "turn-2": 2,
    }


def test_claude_code_span_and_log_of_a_request_make_one_call_whichever_is_there():
    doc = view.load("claude-code-traces")
    spans, logs = view.spans(doc), view.logs(doc)
    _, _, both = assembled("claude-code-traces", "claude-code")
    _, _, spans_only = assembled("claude-code-traces", "claude-code", logs=[])
    _, _, logs_only = assembled("claude-code-traces", "claude-code", spans=[])
    ids = [(record.trace_id, record.span_id) for record in both]
    assert ids == [(record.trace_id, record.span_id) for record in logs_only]
    assert ids == [(record.trace_id, record.span_id) for record in spans_only]
    # The span's inclusive figures give the same split as the record's exclusive ones.
    assert [r.usage.to_dict() for r in spans_only] == [r.usage.to_dict() for r in both]
    assert len(spans) and len(logs)


@pytest.mark.parametrize("scenario", ["claude-code-traces", "codex", "gemini-cli"])
def test_arrival_order_does_not_change_the_calls(scenario):
    name = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli"}[scenario.split("-")[0]]
    doc = view.load(scenario)
    spans, logs = view.spans(doc), view.logs(doc)
    _, _, expected = assembled(scenario, name)
    shuffled = random.Random(15)
    for _ in range(5):
        spans_copy, logs_copy = spans[:], logs[:]
        shuffled.shuffle(spans_copy)
        shuffled.shuffle(logs_copy)
        assert assembled(scenario, name, spans_copy, logs_copy)[2] == expected


def request_bodies(doc: dict) -> dict[str, dict | None]:
    """request_id -> the logged request body, parsed (None when Claude Code cut it)."""
    logs = view.logs(doc)
    bodies = {
        log["attributes"]["request_body_id"]: None
        if log["attributes"].get("body_truncated") == "true"
        else json.loads(log["attributes"]["body"])
        for log in view.named(logs, "api_request_body")
    }
    return {
        log["attributes"]["request_id"]: bodies[log["attributes"]["request_body_id"]]
        for log in view.named(logs, "api_response_body")
    }


def test_claude_code_detailed_rebuilds_each_window_from_its_hashes_and_new_context():
    doc, _, records = assembled("claude-code-detailed", "claude-code")
    logs = view.logs(doc)
    prompts = {
        log["attributes"]["system_prompt_hash"]: log["attributes"]["system_prompt"]
        for log in view.named(logs, "system_prompt")
    }
    spans = {
        span["attributes"]["request_id"]: span
        for span in view.named(view.spans(doc), "claude_code.llm_request")
    }
    requests = {request["request_id"]: request for request in view.model_requests(doc)}
    bodies = request_bodies(doc)
    # The main agent's bodies were cut (60 KB): its windows are rebuilt from hashes and new_context.
    main = [record for record in records if not record.agent_name]
    assert main and any(bodies[record.response_id] is None for record in main)
    for record in main:
        span = spans[record.response_id]["attributes"]
        tools = [item for item in record.items if item.bucket == "tools"]
        assert [item.id for item in tools] == [f"tool:{entry['name']}" for entry in json.loads(span["tools"])]
        assert len(tools) == requests[record.response_id]["tool_count"]
        system = [item for item in record.items if item.bucket == "system"]
        assert [item.content for item in system] == [prompts[span["system_prompt_hash"]]]
        assert record.content_captured and record.manifest_source == "derived"
    by_step = {requests[record.response_id]["step"]: record for record in records}
    first_user = next(item for item in by_step["main-read"].items if item.role == "user")
    assert "[turn-1]" in first_user.content
    # Each later request of an agent resends its earlier window: the same items, in the same order.
    for earlier, later in [
        ("main-read", "main-agent"),
        ("main-agent", "main-answer"),
        ("sub-read", "sub-answer"),
    ]:
        before, after = by_step[earlier].items, by_step[later].items
        assert [item.hash for item in after[: len(before)]] == [item.hash for item in before]
        assert len(after) > len(before)
    # The resumed process resends the whole history as new: the window still continues turn 1's.
    main_answer = [item.hash for item in by_step["main-answer"].items]
    assert [item.hash for item in by_step["turn-2"].items][: len(main_answer)] == main_answer


def test_claude_code_reads_a_subagents_windows_from_its_whole_request_bodies():
    doc, _, records = assembled("claude-code-detailed", "claude-code")
    bodies = request_bodies(doc)
    subagent = [record for record in records if record.agent_name]
    assert subagent and all(bodies[record.response_id] is not None for record in subagent)
    for record in subagent:
        body = bodies[record.response_id]
        assert [item.id for item in record.items if item.bucket == "tools"] == [
            f"tool:{tool['name']}" for tool in body["tools"]
        ]
        instructions = [item for item in record.items if item.id.startswith("system:")]
        assert [item.content for item in instructions] == [block["text"] for block in body["system"]]
        messages = [item for item in record.items if item.id.startswith("msg:")]
        assert len(messages) == len(body["messages"])
        sub_user = next(item for item in record.items if item.role == "user")
        assert "[subagent]" in sub_user.content


def analysed(records) -> list[dict]:
    state, results, texts = new_state(), [], {}
    for seq, record in enumerate(records, start=1):
        texts.update({item.hash: item.content for item in record.items})  # the byte diffs need both
        call = CallInput.from_dict(
            {
                "seq": seq,
                "start_ns": record.start_ns,
                "end_ns": record.end_ns,
                "model": record.model,
                "provider": record.provider,
                "usage": record.usage.to_dict(),
                "usage_raw": record.usage.raw,
                "items": [item.to_dict() for item in record.items],
                "manifest_source": record.manifest_source,
                "tool_definitions": record.tool_definitions,
                "agent": record.agent_name,
                "contents": dict(texts),
            }
        )
        result, state = analyse_call(state, call)
        results.append(result.cache)
    return results


def test_a_subagent_inside_a_claude_code_session_breaks_no_cache():
    _, _, records = assembled("claude-code-detailed", "claude-code")
    assert [cache["broke"] for cache in analysed(records)] == [False] * len(records)


def test_a_changed_tool_definition_in_a_claude_code_session_is_the_invalidator():
    doc = view.load("claude-code-detailed")
    logs, spans = view.logs(doc), view.spans(doc)
    # The same session, but the last request sent another Read tool (as a tool update would).
    last = max(view.named(spans, "claude_code.llm_request"), key=lambda span: span["start_time_unix_nano"])
    tools = json.loads(last["attributes"]["tools"])
    tools = [{**entry, "hash": "changed00000"} if entry["name"] == "Read" else entry for entry in tools]
    last["attributes"]["tools"] = json.dumps(tools)
    read = next(log for log in view.named(logs, "tool") if log["attributes"]["tool_name"] == "Read")
    definition = json.loads(read["attributes"]["tool"])
    changed = {**read, "attributes": {**read["attributes"], "tool_hash": "changed00000"}}
    changed["attributes"]["tool"] = json.dumps(
        {**definition, "description": definition["description"] + " v2"}
    )
    _, _, records = assembled("claude-code-detailed", "claude-code", spans, [*logs, changed])
    cache = analysed(records)[-1]
    assert cache["broke"] and cache["cause"] == "tools_changed"
    assert cache["invalidator_item_id"] == "tool:Read"
    assert cache["detail"]["bytes"]


# --- Codex ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["codex", "codex-json"])
def test_codex_gives_a_call_per_response_with_the_providers_exact_usage_and_turns(scenario):
    doc, key, records = assembled(scenario, "codex")
    requests = view.model_requests(doc)
    assert len(records) == len(requests)
    for record, request in zip(records, requests, strict=True):
        usage = request["usage"]
        cached = usage["input_tokens_details"]["cached_tokens"]
        written = usage["input_tokens_details"]["cache_write_tokens"]
        assert record.usage.to_dict() == {
            "uncached": usage["input_tokens"] - cached - written,
            "cache_write": written,
            "cache_read": cached,
            "output": usage["output_tokens"],
            "reasoning": usage["output_tokens_details"]["reasoning_tokens"],
            "prompt_total": usage["input_tokens"],
        }
        assert record.model == request["model"] and record.run_key == key
    assert numbered(records) == [2 if request["step"] == "turn-2" else 1 for request in requests]


def test_codex_internal_spans_are_no_calls():
    doc = view.load("codex")
    assert [span for span in view.spans(doc) if families.classify(span["name"], span["attributes"])] == []
    assert codex.SESSIONS.span_names == frozenset()


# --- Gemini CLI ----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["gemini-cli", "gemini-cli-traces"])
def test_gemini_cli_gives_a_call_per_request_with_cache_figures_turns_and_items(scenario):
    doc, key, records = assembled(scenario, "gemini-cli")
    requests = view.model_requests(doc)
    assert len(records) == len(requests)
    for record, request in zip(records, requests, strict=True):
        usage = request["usage"]
        thoughts = usage["thoughtsTokenCount"]
        assert record.usage.to_dict() == {
            "uncached": usage["promptTokenCount"] - usage["cachedContentTokenCount"],
            "cache_write": 0,
            "cache_read": usage["cachedContentTokenCount"],
            "output": usage["candidatesTokenCount"] + thoughts,
            "reasoning": thoughts,
            "prompt_total": usage["promptTokenCount"],
        }
        assert len([item for item in record.items if item.bucket == "tools"]) == request["tool_count"]
        assert [item.bucket for item in record.items if item.bucket == "system"] == ["system"]
    assert numbered(records) == [2 if request["step"] == "turn-2" else 1 for request in requests]


def test_gemini_cli_llm_call_spans_are_assembled_not_read_alone():
    doc = view.load("gemini-cli")
    llm_calls = view.named(view.spans(doc), gemini_cli.LLM_CALL)
    assert llm_calls and all(families.classify(s["name"], s["attributes"]) is None for s in llm_calls)
    assert all(
        families.classify(s["name"], s["attributes"]) is None
        for s in view.named(view.spans(view.load("claude-code-traces")), claude_code.LLM_REQUEST)
    )


# --- Figures every CLI reads alike -----------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario, name, figure, kept",
    [
        ("claude-code-default", "claude-code", "output_tokens", "output"),
        ("codex", "codex", "output_token_count", "output"),
        ("gemini-cli", "gemini-cli", "cached_content_token_count", "cache_read"),
    ],
)
@pytest.mark.parametrize("junk", ["²", 2**50, -5, True, "12.5"])
def test_a_cli_figure_that_is_no_count_is_unknown_not_a_failed_batch(scenario, name, figure, kept, junk):
    """Each CLI read its figures with its own copy of a number parser, and "²" (``isdigit()`` says yes,
    ``int()`` says no) raised ValueError, failing the batch; now all read them with ``count_of``."""
    logs = [
        {**log, "attributes": {**log["attributes"], figure: junk}} if figure in log["attributes"] else log
        for log in view.logs(view.load(scenario))
    ]
    _, _, records = assembled(scenario, name, logs=logs)
    assert records and {record.usage.to_dict()[kept] for record in records} == {None}
