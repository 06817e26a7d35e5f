"""Scenarios that drive real GenAI instrumentations against the local fake provider.

This module is stdlib only: the test process imports it to learn the scenarios and to start them, and
never imports an instrumentation (instrumentors patch SDK classes and read environment variables at
instrument time, so each scenario runs in a subprocess of its own, see ``run.py``).

Public API::

    SCENARIOS                                  # name -> Scenario
    run_scenario(name, endpoint, key, capture=None) -> dict   # the description printed by run.py
    replay_scenario(name, endpoint, key, folder) -> dict   # the same, the library run once per session
    run_scenario_kept(name, endpoint, key, folder) -> dict   # run_scenario, its capture kept for replays
    missing_packages(name) -> list[str]
    canonical_usage(provider, usage) -> dict   # what a normaliser should make of one call's usage
    raw_usage_attributes(scenario, call, scope=None) -> (expected, absent)   # what was observed
    is_model_call(attributes) -> bool

Every scenario has the same conversation, with three model calls:

    turn 1  user: "What's the weather and the local time in Paris?"
            call 1 -> two parallel tool calls: get_weather(Paris), get_time(Paris)
            (the tools run, both results are sent back in one request)
            call 2 -> text answer
    turn 2  user: "Thanks! Should I pack an umbrella for tomorrow?"
            call 3 -> text answer (streamed by the plain Anthropic SDK driver; Pydantic AI's
                      AnthropicModel streams every call by itself)

The SDK-only drivers wrap each turn in an application span ``agent turn`` (scope
tests.instrumented.app), so the calls of a turn share a trace; Pydantic AI makes its own
``invoke_agent`` root span per run.

Each call's reply carries its own usage figures (see ``OPENAI_CALLS`` and ``ANTHROPIC_CALLS``), all
distinct, so a test can tell every call and every field apart.

Issue 14's scenarios bring their own scripts (``Scenario.script``): the same conversation with other
figures (zero cache figures, the Responses API, Gemini, every call streamed), or a one-turn multi-agent
run (openai-agents handoff and agent-as-tool, pydantic-ai delegation) whose calls name their ``agent``.
What ctxview should derive from those is in ``expected_agents.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.instrumented.fake_providers import (
    STREAM_START_OUTPUT_TOKENS,
    anthropic_usage,
    gemini_usage,
    openai_usage,
    responses_usage,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "data" / "otlp"
RESULT_MARKER = "CTXVIEW-SCENARIO-RESULT "

# ---------------------------------------------------------------------------------------------
# The conversation
# ---------------------------------------------------------------------------------------------
SYSTEM_PROMPT = "You are a concise travel assistant. Use the tools for live data."
USER_TURNS = [
    "What's the weather and the local time in Paris?",
    "Thanks! Should I pack an umbrella for tomorrow?",
]
TOOL_RESULTS = {"get_weather": "18°C, light rain", "get_time": "14:05"}
TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "Current local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
]
ANSWER_1 = "In Paris it is 18°C with light rain, and the local time is 14:05."
ANSWER_2 = "Yes: rain is likely to continue tomorrow, so pack an umbrella."

OPENAI_MODEL = "gpt-4.1-mini"
OPENAI_RESPONSE_MODEL = "gpt-4.1-mini-2025-04-14"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
ANTHROPIC_RESPONSE_MODEL = "claude-sonnet-4-5-20250929"
GEMINI_MODEL = "gemini-2.5-flash"
GEMINI_RESPONSE_MODEL = "gemini-2.5-flash-preview-05-20"


@dataclass(frozen=True)
class CallScript:
    """One scripted model call: where it sits in the conversation and what the fake answers."""

    turn: int
    step: int  # 1-based position of the call inside its turn
    response_id: str
    usage: dict[str, Any]  # the provider's usage object exactly as the fake returns it
    tool_calls: tuple[tuple[str, str, dict], ...] = ()  # (id, name, arguments)
    text: str | None = None
    stream: bool = False
    agent: str | None = None  # the agent that makes the call, in the multi-agent scenarios
    # Fields the fake adds to its reply (Anthropic's diagnostics, context_management).
    response_extra: dict[str, Any] = field(default_factory=dict)

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


# prompt_tokens includes cached_tokens (and cache_write_tokens); completion includes reasoning.
OPENAI_CALLS = (
    CallScript(
        1,
        1,
        "chatcmpl-fake-0001",
        openai_usage(1412, 64, cached_tokens=256, reasoning_tokens=18, cache_write_tokens=1024),
        tool_calls=(
            ("call_weather_paris", "get_weather", {"city": "Paris"}),
            ("call_time_paris", "get_time", {"city": "Paris"}),
        ),
    ),
    CallScript(
        1,
        2,
        "chatcmpl-fake-0002",
        openai_usage(1531, 47, cached_tokens=1280, reasoning_tokens=9),
        text=ANSWER_1,
    ),
    CallScript(
        2,
        1,
        "chatcmpl-fake-0003",
        openai_usage(1597, 112, cached_tokens=1408, reasoning_tokens=40),
        text=ANSWER_2,
    ),
)

# input_tokens excludes both cache buckets; every field is non-zero and distinct.
ANTHROPIC_CALLS = (
    CallScript(
        1,
        1,
        "msg_fake_0001",
        anthropic_usage(312, 71, cache_creation_input_tokens=1824, cache_read_input_tokens=96),
        tool_calls=(
            ("toolu_weather_paris", "get_weather", {"city": "Paris"}),
            ("toolu_time_paris", "get_time", {"city": "Paris"}),
        ),
    ),
    CallScript(
        1,
        2,
        "msg_fake_0002",
        anthropic_usage(
            143,
            58,
            cache_creation_input_tokens=259,
            cache_read_input_tokens=1920,
            ephemeral_1h_input_tokens=259,
        ),
        text=ANSWER_1,
    ),
    CallScript(
        2,
        1,
        "msg_fake_0003",
        anthropic_usage(27, 133, cache_creation_input_tokens=201, cache_read_input_tokens=2179),
        text=ANSWER_2,
        stream=True,
    ),
)

# The same conversation with the same figures, every call streamed (stream_options.include_usage).
OPENAI_STREAM_CALLS = tuple(replace(call, stream=True) for call in OPENAI_CALLS)

# Anthropic with zero cache figures: call 1 only writes, calls 2 and 3 only read (nothing new is
# written, so call 3 reads what call 1 wrote). The real API sends the zeros; instrumentations may not.
ANTHROPIC_ZERO_CACHE_CALLS = (
    replace(ANTHROPIC_CALLS[0], usage=anthropic_usage(312, 71, cache_creation_input_tokens=1824)),
    replace(ANTHROPIC_CALLS[1], usage=anthropic_usage(398, 58, cache_read_input_tokens=1824)),
    replace(ANTHROPIC_CALLS[2], usage=anthropic_usage(461, 133, cache_read_input_tokens=1824)),
)

# Anthropic's beta API with context editing and cache diagnostics (both asked for by the driver): call 2
# reads its prefix (no miss); before call 3 the API clears the two tool results (context editing), so
# call 3 reads only what call 1 wrote, says why (messages_changed) and how much it could have read.
ANTHROPIC_DIAGNOSIS_CALLS = (
    ANTHROPIC_CALLS[0],
    replace(ANTHROPIC_CALLS[1], response_extra={"diagnostics": {"cache_miss_reason": None}}),
    replace(
        ANTHROPIC_CALLS[2],
        usage=anthropic_usage(27, 133, cache_creation_input_tokens=556, cache_read_input_tokens=1824),
        stream=False,
        response_extra={
            "diagnostics": {
                "cache_miss_reason": {"type": "messages_changed", "cache_missed_input_tokens": 355}
            },
            "context_management": {
                "applied_edits": [
                    {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 60}
                ]
            },
        },
    ),
)

# The Responses API (input_tokens includes cached_tokens; output includes reasoning).
RESPONSES_CALLS = (
    replace(OPENAI_CALLS[0], response_id="resp_fake_0001", usage=responses_usage(1412, 64, 256, 18)),
    replace(OPENAI_CALLS[1], response_id="resp_fake_0002", usage=responses_usage(1531, 47, 1280, 9)),
    replace(OPENAI_CALLS[2], response_id="resp_fake_0003", usage=responses_usage(1597, 112, 1408, 40)),
)

# Gemini: promptTokenCount includes cachedContentTokenCount; candidates exclude thoughts; zero
# figures are left out of usageMetadata (as the real API does), so call 1 has no cached count.
GEMINI_CALLS = (
    replace(OPENAI_CALLS[0], response_id="gemini-fake-0001", usage=gemini_usage(1388, 52, 0, 21)),
    replace(OPENAI_CALLS[1], response_id="gemini-fake-0002", usage=gemini_usage(1467, 39, 1024, 7)),
    replace(OPENAI_CALLS[2], response_id="gemini-fake-0003", usage=gemini_usage(1549, 97, 1408, 0)),
)

# --- Multi-agent conversations (one user turn each) -------------------------------------------
BILLING_QUESTION = "I was charged twice for my May invoice. My email is ana@example.com."
CUSTOMER = {"customer_id": "cus_0042", "plan": "pro"}
INVOICE = {"invoice": "INV-0519", "charges": 2, "amount_eur": 49}
TRIAGE_INSTRUCTIONS = "You are the triage agent. Look the customer up, then hand billing questions over."
BILLING_INSTRUCTIONS = "You are the billing agent. Check invoices with get_invoice and explain charges."
ORCHESTRATOR_INSTRUCTIONS = "You are the support orchestrator. Ask the billing agent about any charge."
BILLING_ANSWER = "INV-0519 was charged twice (2 x 49 EUR); the duplicate will be refunded."
ORCHESTRATOR_ANSWER = "Billing confirms a duplicate charge on INV-0519; you will get 49 EUR back."

# openai-agents, handoff: triage (its own tool) hands off to billing (its own tool) in one run.
AGENTS_HANDOFF_CALLS = (
    CallScript(
        1,
        1,
        "resp_handoff_0001",
        responses_usage(812, 31),
        tool_calls=(("call_lookup", "lookup_customer", {"email": "ana@example.com"}),),
        agent="triage_agent",
    ),
    CallScript(
        1,
        2,
        "resp_handoff_0002",
        responses_usage(905, 22, cached_tokens=768),
        tool_calls=(("call_transfer", "transfer_to_billing_agent", {}),),
        agent="triage_agent",
    ),
    CallScript(
        1,
        3,
        "resp_handoff_0003",
        responses_usage(1020, 35, reasoning_tokens=12),
        tool_calls=(("call_invoice", "get_invoice", {"month": "May"}),),
        agent="billing_agent",
    ),
    CallScript(
        1,
        4,
        "resp_handoff_0004",
        responses_usage(1107, 88, cached_tokens=1024),
        text=BILLING_ANSWER,
        agent="billing_agent",
    ),
)

# openai-agents, agent as tool: the orchestrator calls the billing agent through billing.as_tool().
AGENTS_AS_TOOL_CALLS = (
    CallScript(
        1,
        1,
        "resp_astool_0001",
        responses_usage(760, 40),
        tool_calls=(
            ("call_ask_billing", "ask_billing_agent", {"input": "Duplicate May charge, ana@example.com"}),
        ),
        agent="orchestrator",
    ),
    CallScript(
        1,
        2,
        "resp_astool_0002",
        responses_usage(540, 28),
        tool_calls=(("call_invoice", "get_invoice", {"month": "May"}),),
        agent="billing_agent",
    ),
    CallScript(
        1,
        3,
        "resp_astool_0003",
        responses_usage(612, 57, cached_tokens=512),
        text=BILLING_ANSWER,
        agent="billing_agent",
    ),
    CallScript(
        1,
        4,
        "resp_astool_0004",
        responses_usage(880, 74, cached_tokens=768, reasoning_tokens=16),
        text=ORCHESTRATOR_ANSWER,
        agent="orchestrator",
    ),
)

# pydantic-ai delegation: the planner's tool runs the weather expert (`usage=ctx.usage`).
PLANNER_QUESTION = "Plan a walk in Paris tomorrow: will it rain?"
PLANNER_INSTRUCTIONS = "You plan city walks. Ask the weather expert about the weather."
EXPERT_INSTRUCTIONS = "You are a weather expert. Use get_weather for live data."
EXPERT_ANSWER = "Light rain is expected in Paris tomorrow morning, dry after 14:00."
PLANNER_ANSWER = "Walk in the afternoon: the rain should stop by 14:00. Take an umbrella anyway."


def _delegation_calls(planner_rereads_cache: bool) -> tuple[CallScript, ...]:
    if planner_rereads_cache:
        last_usage = anthropic_usage(130, 96, cache_creation_input_tokens=260, cache_read_input_tokens=1500)
    else:  # the planner's instructions changed: its prefix is written again from the start
        last_usage = anthropic_usage(130, 96, cache_creation_input_tokens=1760)
    return (
        CallScript(
            1,
            1,
            "msg_plan_0001",
            anthropic_usage(210, 45, cache_creation_input_tokens=1500),
            tool_calls=(
                ("toolu_ask_expert", "ask_weather_expert", {"question": "Will it rain in Paris tomorrow?"}),
            ),
            agent="planner",
        ),
        CallScript(
            1,
            2,
            "msg_plan_0002",
            anthropic_usage(180, 30, cache_creation_input_tokens=1100),
            tool_calls=(("toolu_weather", "get_weather", {"city": "Paris"}),),
            agent="weather_expert",
        ),
        CallScript(
            1,
            3,
            "msg_plan_0003",
            anthropic_usage(95, 41, cache_creation_input_tokens=120, cache_read_input_tokens=1100),
            text=EXPERT_ANSWER,
            agent="weather_expert",
        ),
        CallScript(1, 4, "msg_plan_0004", last_usage, text=PLANNER_ANSWER, agent="planner"),
    )


DELEGATION_CALLS = _delegation_calls(planner_rereads_cache=True)
DELEGATION_BREAK_CALLS = _delegation_calls(planner_rereads_cache=False)

# pydantic-ai: the lead's tool runs the researcher once per user turn (issue 33). Each researcher run is a
# new invocation (a new gen_ai.conversation.id) of the same agent: same instructions and tools, a new
# question. Its second run reads the shared prefix (tools and instructions) from the cache; the lead's
# turn 2 continues its turn 1 (message_history: the same conversation id), reading its cached history.
LEAD_QUESTIONS = ("What is the boiling point of water at 2,000 m?", "And at 4,000 m?")
LEAD_INSTRUCTIONS = "You answer science questions. Ask the researcher for facts before answering."
RESEARCHER_INSTRUCTIONS = "You are a researcher. Look facts up with search_facts and cite them briefly."
RESEARCHER_ANSWERS = ("About 93.4 °C at 2,000 m.", "About 86.6 °C at 4,000 m.")
LEAD_ANSWERS = ("Water boils at about 93 °C at 2,000 m.", "At 4,000 m it boils at about 87 °C.")
RESEARCHER_TWICE_CALLS = (
    CallScript(
        1,
        1,
        "msg_lead_0001",
        anthropic_usage(190, 38, cache_creation_input_tokens=1400),
        tool_calls=(("toolu_ask_1", "ask_researcher", {"question": "Boiling point of water at 2,000 m?"}),),
        agent="lead",
    ),
    CallScript(
        1,
        2,
        "msg_research_0001",
        anthropic_usage(60, 24, cache_creation_input_tokens=1200),
        text=RESEARCHER_ANSWERS[0],
        agent="researcher",
    ),
    CallScript(
        1,
        3,
        "msg_lead_0002",
        anthropic_usage(110, 30, cache_creation_input_tokens=120, cache_read_input_tokens=1400),
        text=LEAD_ANSWERS[0],
        agent="lead",
    ),
    CallScript(
        2,
        1,
        "msg_lead_0003",
        anthropic_usage(40, 36, cache_creation_input_tokens=150, cache_read_input_tokens=1520),
        tool_calls=(("toolu_ask_2", "ask_researcher", {"question": "Boiling point of water at 4,000 m?"}),),
        agent="lead",
    ),
    CallScript(
        2,
        2,
        "msg_research_0002",
        # The shared prefix (tools and instructions) is read from the first run's cache.
        anthropic_usage(60, 24, cache_creation_input_tokens=40, cache_read_input_tokens=1160),
        text=RESEARCHER_ANSWERS[1],
        agent="researcher",
    ),
    CallScript(
        2,
        3,
        "msg_lead_0004",
        anthropic_usage(105, 33, cache_creation_input_tokens=110, cache_read_input_tokens=1670),
        text=LEAD_ANSWERS[1],
        agent="lead",
    ),
)


def canonical_usage(provider: str, usage: dict[str, Any]) -> dict[str, int | None]:
    """The provider's figures in ctxview's terms (conventions.md §6): what a normaliser should produce.

    ``input_total`` includes cache reads and writes; ``uncached_input`` excludes them; ``output``
    includes reasoning.
    """
    if provider == "anthropic":
        cache_read = usage.get("cache_read_input_tokens") or 0
        cache_write = usage.get("cache_creation_input_tokens") or 0
        return {
            "input_total": usage["input_tokens"] + cache_read + cache_write,
            "uncached_input": usage["input_tokens"],
            "cache_read": cache_read,
            "cache_write": cache_write,
            "output": usage["output_tokens"],
            "reasoning": None,
        }
    if provider == "openai-responses":
        cache_read = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        return {
            "input_total": usage["input_tokens"],
            "uncached_input": usage["input_tokens"] - cache_read,
            "cache_read": cache_read,
            "cache_write": 0,  # the Responses API reports no cache writes (conventions.md §6)
            "output": usage["output_tokens"],
            "reasoning": (usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
        }
    if provider == "gemini":
        cache_read = usage.get("cachedContentTokenCount") or 0
        thoughts = usage.get("thoughtsTokenCount") or 0
        return {
            "input_total": usage["promptTokenCount"],
            "uncached_input": usage["promptTokenCount"] - cache_read,
            "cache_read": cache_read,
            "cache_write": 0,  # explicit caches are created by a separate call (conventions.md §6)
            "output": usage["candidatesTokenCount"] + thoughts,
            "reasoning": thoughts,
        }
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    cache_read = prompt.get("cached_tokens") or 0
    cache_write = prompt.get("cache_write_tokens") or 0
    return {
        "input_total": usage["prompt_tokens"],
        "uncached_input": usage["prompt_tokens"] - cache_read - cache_write,
        "cache_read": cache_read,
        "cache_write": cache_write,
        "output": usage["completion_tokens"],
        "reasoning": completion.get("reasoning_tokens"),
    }


# ---------------------------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------------------------
_LATEST = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}
# anthropic>=2 traces its own API calls (scope com.anthropic.sdk.python) whenever a global tracer
# provider is set. Scenarios about another instrumentation turn that off, so their fixtures hold one
# model-call span per call; the *-sdktrace and anthropic-sdk-native scenarios keep it.
_NO_SDK_TRACING = {"ANTHROPIC_OPEN_TELEMETRY": "false"}
SDK_SCOPE = "com.anthropic.sdk.python"


@dataclass(frozen=True)
class Scenario:
    name: str
    provider: str  # "openai" or "anthropic": which fake API and which usage script
    driver: str  # "openai_sdk", "anthropic_sdk" or "pydantic_ai": the code that holds the conversation
    instrumentation: str  # the instrumentor run.py sets up ("anthropic-sdk": none, the SDK's own)
    scope: str  # instrumentation scope of this instrumentation's model-call spans
    packages: tuple[str, ...]  # distributions the subprocess imports
    env: dict[str, str] = field(default_factory=dict)
    logs: bool = False  # whether content arrives as log records (at /v1/logs)
    summary: str = ""
    script: tuple[CallScript, ...] | None = None  # the calls, when not the shared three-call conversation
    user_turns: tuple[str, ...] = tuple(USER_TURNS)
    dynamic_instructions: bool = False  # pydantic_ai_delegation: the planner's instructions count its steps
    # Model-call-kind spans that only prepare a request (LlamaIndex's ``OpenAI._prepare_chat_with_tools``):
    # not requests, so not paired with the scripted calls (issue 33).
    preparing_spans: tuple[str, ...] = ()
    # Why the packages cannot be installed beside the project's (its recording was made in a venv of its
    # own, tests/instrumented/README.md): it is not in LIVE_SCENARIOS; its recording is checked like
    # every other.
    own_venv: str = ""

    @property
    def calls(self) -> tuple[CallScript, ...]:
        if self.script is not None:
            return self.script
        script = OPENAI_CALLS if self.provider == "openai" else ANTHROPIC_CALLS
        if self.driver == "anthropic_sdk":
            return script
        # Only the plain Anthropic SDK driver asks for a stream (turn 2). Pydantic AI decides itself
        # (its AnthropicModel streams every request); the description records what was sent.
        return tuple(replace(call, stream=False) for call in script)

    @property
    def scopes(self) -> tuple[str, ...]:
        """Every scope expected to record each model call: ``scope`` first, then the SDK's own."""
        sdk_tracing = self.provider == "anthropic" and self.env.get("ANTHROPIC_OPEN_TELEMETRY") != "false"
        return (self.scope, SDK_SCOPE) if sdk_tracing and self.scope != SDK_SCOPE else (self.scope,)


_OPENAI_V2 = ("openai", "opentelemetry-instrumentation-openai-v2", "opentelemetry-util-genai")
_OPENAI_V2_SCOPE = "opentelemetry.util.genai.handler"
_OI_ANTHROPIC = ("anthropic", "openinference-instrumentation-anthropic")
_OI_ANTHROPIC_SCOPE = "openinference.instrumentation.anthropic"
_AGENTS = ("openai", "openai-agents", "openinference-instrumentation-openai-agents")
_AGENTS_SCOPE = "openinference.instrumentation.openai_agents"
_PYDANTIC_AI_ANTHROPIC = ("anthropic", "pydantic-ai-slim")
_SCENARIO_LIST = [
    Scenario(
        "openai-v2-span",
        "openai",
        "openai_sdk",
        "openai-v2",
        _OPENAI_V2_SCOPE,
        _OPENAI_V2,
        _LATEST | {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
        summary="official openai-v2, latest GenAI conventions, content on the span",
    ),
    Scenario(
        "openai-v2-event",
        "openai",
        "openai_sdk",
        "openai-v2",
        _OPENAI_V2_SCOPE,
        _OPENAI_V2,
        _LATEST | {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
        logs=True,
        summary="official openai-v2, latest GenAI conventions, content only in log events",
    ),
    Scenario(
        "openai-v2-nocontent",
        "openai",
        "openai_sdk",
        "openai-v2",
        _OPENAI_V2_SCOPE,
        _OPENAI_V2,
        _LATEST | {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"},
        summary="official openai-v2, latest GenAI conventions, no content",
    ),
    Scenario(
        "openinference-openai",
        "openai",
        "openai_sdk",
        "openinference-openai",
        "openinference.instrumentation.openai",
        ("openai", "openinference-instrumentation-openai"),
        summary="Arize OpenInference, OpenAI SDK",
    ),
    Scenario(
        "openinference-anthropic",
        "anthropic",
        "anthropic_sdk",
        "openinference-anthropic",
        _OI_ANTHROPIC_SCOPE,
        _OI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Arize OpenInference, Anthropic SDK (SDK tracing off; turn 2 streamed with messages.stream)",
    ),
    Scenario(
        "openinference-anthropic-sdktrace",
        "anthropic",
        "anthropic_sdk",
        "openinference-anthropic",
        _OI_ANTHROPIC_SCOPE,
        _OI_ANTHROPIC,
        summary="Arize OpenInference, Anthropic SDK with its own tracing on (the default): two spans a call",
    ),
    Scenario(
        "openllmetry-anthropic",
        "anthropic",
        "anthropic_sdk",
        "openllmetry-anthropic",
        "opentelemetry.instrumentation.anthropic",
        ("anthropic", "opentelemetry-instrumentation-anthropic"),
        _NO_SDK_TRACING,
        summary="Traceloop OpenLLMetry, Anthropic SDK (SDK tracing off; turn 2 streamed, messages.stream)",
    ),
    Scenario(
        "anthropic-sdk-native",
        "anthropic",
        "anthropic_sdk",
        "anthropic-sdk",
        SDK_SCOPE,
        ("anthropic",),
        {"ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": "content"},
        summary="no instrumentation: the Anthropic SDK's own tracing, content mode (turn 2 streamed)",
    ),
    Scenario(
        "pydantic-ai-openai",
        "openai",
        "pydantic_ai",
        "pydantic-ai",
        "pydantic-ai",
        ("openai", "pydantic-ai-slim"),
        summary="Pydantic AI Agent.instrument_all(), OpenAIChatModel",
    ),
    Scenario(
        "pydantic-ai-anthropic",
        "anthropic",
        "pydantic_ai",
        "pydantic-ai",
        "pydantic-ai",
        ("anthropic", "pydantic-ai-slim"),
        _NO_SDK_TRACING,
        summary="Pydantic AI Agent.instrument_all(), AnthropicModel (SDK tracing off; it streams every call)",
    ),
    # --- Issue 14: multi-agent frameworks and instrumentation quirks ----------------------------
    Scenario(
        "openai-agents-handoff",
        "openai-responses",
        "openai_agents_handoff",
        "openinference-openai-agents",
        _AGENTS_SCOPE,
        _AGENTS,
        summary="openai-agents + OpenInference: triage agent hands off to the billing agent (Responses API)",
        script=AGENTS_HANDOFF_CALLS,
        user_turns=(BILLING_QUESTION,),
    ),
    Scenario(
        "openai-agents-as-tool",
        "openai-responses",
        "openai_agents_as_tool",
        "openinference-openai-agents",
        _AGENTS_SCOPE,
        _AGENTS,
        summary="openai-agents + OpenInference: the orchestrator calls the billing agent via as_tool()",
        script=AGENTS_AS_TOOL_CALLS,
        user_turns=(BILLING_QUESTION,),
    ),
    Scenario(
        "pydantic-ai-delegation",
        "anthropic",
        "pydantic_ai_delegation",
        "pydantic-ai",
        "pydantic-ai",
        _PYDANTIC_AI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Pydantic AI delegation: a tool of the planner runs the weather expert (usage=ctx.usage)",
        script=DELEGATION_CALLS,
        user_turns=(PLANNER_QUESTION,),
    ),
    Scenario(
        "pydantic-ai-delegation-cachebreak",
        "anthropic",
        "pydantic_ai_delegation",
        "pydantic-ai",
        "pydantic-ai",
        _PYDANTIC_AI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Pydantic AI delegation; the planner's instructions count its steps: one real cache break",
        script=DELEGATION_BREAK_CALLS,
        user_turns=(PLANNER_QUESTION,),
        dynamic_instructions=True,
    ),
    Scenario(
        "pydantic-ai-researcher-twice",
        "anthropic",
        "pydantic_ai_researcher_twice",
        "pydantic-ai",
        "pydantic-ai",
        _PYDANTIC_AI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Pydantic AI: the lead's tool runs the researcher once per user turn (two invocations)",
        script=RESEARCHER_TWICE_CALLS,
        user_turns=LEAD_QUESTIONS,
    ),
    Scenario(
        "openinference-llama-index-agent",
        "openai",
        "llama_index_function_agent",
        "openinference-llama-index",
        "openinference.instrumentation.llama_index",
        ("llama-index-core", "llama-index-llms-openai", "openinference-instrumentation-llama-index"),
        summary="Arize OpenInference, LlamaIndex FunctionAgent, OpenAI SDK (streamed Chat Completions)",
        script=OPENAI_STREAM_CALLS,
        preparing_spans=("OpenAI._prepare_chat_with_tools",),
        own_venv="llama-index-llms-openai 0.8.3 wants openai<3 and the project pins openai 3.57",
    ),
    Scenario(
        "openinference-anthropic-zerocache",
        "anthropic",
        "anthropic_sdk",
        "openinference-anthropic",
        _OI_ANTHROPIC_SCOPE,
        _OI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Arize OpenInference, Anthropic SDK: call 1 only writes the cache, calls 2 and 3 only read",
        script=ANTHROPIC_ZERO_CACHE_CALLS,
    ),
    Scenario(
        "openinference-anthropic-diagnostics",
        "anthropic",
        "anthropic_beta",
        "openinference-anthropic",
        _OI_ANTHROPIC_SCOPE,
        _OI_ANTHROPIC,
        _NO_SDK_TRACING,
        summary="Arize OpenInference, Anthropic beta API: context editing and cache diagnostics asked for",
        script=ANTHROPIC_DIAGNOSIS_CALLS,
    ),
    Scenario(
        "google-genai",
        "gemini",
        "google_genai",
        "google-genai",
        _OPENAI_V2_SCOPE,  # util-genai emits the spans, as for openai-v2
        ("google-genai", "opentelemetry-instrumentation-google-genai"),
        _LATEST | {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
        logs=True,  # one operation.details event per call even in SPAN_ONLY mode (usage, no content)
        summary="official google-genai instrumentation, Gemini generateContent (cachedContentTokenCount)",
        script=GEMINI_CALLS,
    ),
    Scenario(
        "openai-v2-stream",
        "openai",
        "openai_sdk",
        "openai-v2",
        _OPENAI_V2_SCOPE,
        _OPENAI_V2,
        _LATEST | {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
        summary="official openai-v2, every call streamed (include_usage), content on the span",
        script=OPENAI_STREAM_CALLS,
    ),
    Scenario(
        "openinference-openai-responses",
        "openai-responses",
        "openai_responses",
        "openinference-openai",
        "openinference.instrumentation.openai",
        ("openai", "openinference-instrumentation-openai"),
        summary="Arize OpenInference, OpenAI SDK, the Responses API (client.responses.create)",
        script=RESPONSES_CALLS,
    ),
    Scenario(
        "openllmetry-openai",
        "openai",
        "openai_sdk",
        "openllmetry-openai",
        "opentelemetry.instrumentation.openai.v1",
        ("openai", "opentelemetry-instrumentation-openai"),
        summary="Traceloop OpenLLMetry, OpenAI SDK (Chat Completions)",
    ),
]
SCENARIOS: dict[str, Scenario] = {scenario.name: scenario for scenario in _SCENARIO_LIST}
# The scenarios the live tests drive here: not those recorded in a venv of their own (their packages
# cannot be installed beside the project's), whose recordings the recording tests check instead.
LIVE_SCENARIOS = [name for name, scenario in SCENARIOS.items() if not scenario.own_venv]


def missing_packages(name: str) -> list[str]:
    """The distributions that scenario ``name`` needs and that are not installed."""
    missing = []
    for package in SCENARIOS[name].packages:
        try:
            importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            missing.append(package)
    return missing


class ScenarioError(RuntimeError):
    pass


def run_scenario(
    name: str,
    endpoint: str | None,
    key: str | None,
    capture: str | os.PathLike | None = None,
    timeout: float = 180,
) -> dict[str, Any]:
    """Run scenario ``name`` in a subprocess, exporting to ``endpoint`` (a ctxview base URL) with ``key``.

    Returns the JSON description the subprocess printed (see ``run.describe``). With ``capture``, the
    subprocess also writes what it exported as an OTLP/JSON fixture file there. ``endpoint=None``
    exports nowhere (useful with ``capture``).
    """
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    command = [sys.executable, "-m", "tests.instrumented.run", name]
    if endpoint:
        command += ["--endpoint", endpoint, "--key", key or ""]
    if capture:
        command += ["--capture", str(capture)]
    completed = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=child_environment()
    )
    result = None
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            result = json.loads(line[len(RESULT_MARKER) :])
    if completed.returncode != 0 or result is None:
        raise ScenarioError(
            f"scenario {name} exited with {completed.returncode}\n"
            f"--- stdout ---\n{completed.stdout[-4000:]}\n--- stderr ---\n{completed.stderr[-8000:]}"
        )
    result["stderr"] = completed.stderr[-4000:]
    return result


@contextlib.contextmanager
def _scenario_lock(folder: Path, name: str):
    """One process of the session at a time runs scenario ``name``; the others wait for its capture."""
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a loopback server: never a proxy


def run_scenario_kept(name: str, endpoint: str, key: str, folder: Path) -> dict[str, Any]:
    """``run_scenario`` exporting to ``endpoint``, what it exported kept in ``folder`` for
    ``replay_scenario`` (unless a capture is there already)."""
    with _scenario_lock(folder, name):
        capture = folder / f"{name}.json"
        partial = folder / f"{name}.partial"
        result = run_scenario(name, endpoint, key, capture=None if capture.exists() else partial)
        if partial.exists() and not result["problems"]:
            partial.replace(capture)
    return result


def replay_scenario(name: str, endpoint: str, key: str, folder: Path) -> dict[str, Any]:
    """Scenario ``name`` as the real library emitted it, sent to ``endpoint`` (a ctxview base URL) with
    ``key``; returns its description, as ``run_scenario`` does.

    The library runs once per test session, in a subprocess that captures what it exports (OTLP/JSON,
    the exporter's own encoding) into ``folder``, shared by the session's xdist workers; every test that
    reads the scenario POSTs those export bodies to its own server. Starting the instrumented libraries
    took ~3 s a test, four tests a scenario. The exporters' own delivery is checked on a real run by
    test_instrumented (``run_scenario_kept``: its capture serves the replays too)."""
    capture = folder / f"{name}.json"
    with _scenario_lock(folder, name):
        if not capture.exists():
            partial = folder / f"{name}.partial"
            result = run_scenario(name, None, None, capture=partial)
            if result["problems"] or not partial.exists():
                return result  # not captured: the test's own assertions say what went wrong
            partial.replace(capture)
    document = json.loads(capture.read_text())
    for path, body in (("/v1/traces", document["traces"]), ("/v1/logs", document["logs"])):
        if body:
            request = urllib.request.Request(
                endpoint.rstrip("/") + path,
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
            )
            with DIRECT.open(request, timeout=60) as response:  # an error status raises
                response.read()
    return document["description"]


def child_environment() -> dict[str, str]:
    """The parent's environment without anything that would change what an instrumentation emits.

    ``run.py`` sets the scenario's own variables; here inherited OTEL_*, TRACELOOP_*, OPENINFERENCE_*
    and provider settings (OPENAI_, ANTHROPIC_, GOOGLE_, GEMINI_) are dropped, so a developer's shell
    cannot change a scenario.
    """
    dropped_prefixes = (
        "OTEL_",
        "TRACELOOP_",
        "OPENINFERENCE_",
        "OPENAI_",
        "ANTHROPIC_",
        "LOGFIRE_",
        "GOOGLE_",
        "GEMINI_",
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith(dropped_prefixes)}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return environment


def is_model_call(attributes: dict[str, Any]) -> bool:
    """Whether span attributes mark a model call, in any of the conventions these scenarios emit."""
    return (
        attributes.get("openinference.span.kind") == "LLM"
        or attributes.get("gen_ai.operation.name") in ("chat", "text_completion", "generate_content")
        or attributes.get("llm.request.type") in ("chat", "completion")
    )


# ---------------------------------------------------------------------------------------------
# What each instrumentation was observed to emit for usage (the pinned versions in README.md)
# ---------------------------------------------------------------------------------------------
def _anthropic_total_input(usage: dict[str, Any]) -> int:
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]


def _non_zero(expected: dict[str, int], optional: dict[str, int]) -> tuple[dict[str, int], tuple[str, ...]]:
    """``expected`` plus the ``optional`` figures that are not 0; the zero ones' names as absent."""
    present = {name: value for name, value in optional.items() if value}
    return expected | present, tuple(name for name in optional if name not in present)


def raw_usage_attributes(scenario: Scenario, call: dict[str, Any], scope: str | None = None):
    """(expected, absent): the raw usage attributes that ``scope``'s model-call span of ``call`` carries.

    ``call`` is one entry of a description's ``calls``; ``scope`` defaults to the scenario's own.
    ``expected`` maps attribute names to exact values; ``absent`` names usage attributes that the
    instrumentation does not emit although the provider reported the figure (known gaps).
    """
    usage = call["usage"]
    scope = scope or scenario.scope
    if scope == SDK_SCOPE:  # anthropic>=2's own tracing, new genai-repo name cache_write
        creation = usage["cache_creation"]
        return {
            "gen_ai.usage.input_tokens": _anthropic_total_input(usage),
            "gen_ai.usage.output_tokens": usage["output_tokens"],
            "gen_ai.usage.cache_read.input_tokens": usage["cache_read_input_tokens"],
            "gen_ai.usage.cache_write.input_tokens": usage["cache_creation_input_tokens"],
            "anthropic.usage.cache_creation.ephemeral_5m_input_tokens": creation["ephemeral_5m_input_tokens"],
            "anthropic.usage.cache_creation.ephemeral_1h_input_tokens": creation["ephemeral_1h_input_tokens"],
        }, ("gen_ai.usage.cache_creation.input_tokens",)

    instrumentation = scenario.instrumentation
    if instrumentation == "openai-v2":  # streamed or not
        # Chat Completions: only prompt/completion; cached and reasoning tokens are dropped.
        return {
            "gen_ai.usage.input_tokens": usage["prompt_tokens"],
            "gen_ai.usage.output_tokens": usage["completion_tokens"],
        }, (
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_write.input_tokens",
            "gen_ai.usage.reasoning.output_tokens",
        )
    if instrumentation in ("openinference-openai-agents", "openinference-openai") and (
        scenario.provider == "openai-responses"
    ):
        # Responses API: cached and reasoning figures are sent even when 0; no cache write.
        return {
            "llm.token_count.prompt": usage["input_tokens"],
            "llm.token_count.completion": usage["output_tokens"],
            "llm.token_count.total": usage["total_tokens"],
            "llm.token_count.prompt_details.cache_read": usage["input_tokens_details"]["cached_tokens"],
            "llm.token_count.completion_details.reasoning": usage["output_tokens_details"][
                "reasoning_tokens"
            ],
        }, ("llm.token_count.prompt_details.cache_write",)
    if instrumentation == "openinference-llama-index":
        # LlamaIndex's OpenAI LLM streams without stream_options.include_usage: no usage comes back.
        return {}, ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total")
    if instrumentation == "openinference-openai":
        details = usage["prompt_tokens_details"]
        expected = {
            "llm.token_count.prompt": usage["prompt_tokens"],
            "llm.token_count.completion": usage["completion_tokens"],
            "llm.token_count.total": usage["total_tokens"],
            "llm.token_count.prompt_details.cache_read": details["cached_tokens"],
            "llm.token_count.completion_details.reasoning": usage["completion_tokens_details"][
                "reasoning_tokens"
            ],
        }
        if "cache_write_tokens" in details:
            expected["llm.token_count.prompt_details.cache_write"] = details["cache_write_tokens"]
            return expected, ()
        return expected, ("llm.token_count.prompt_details.cache_write",)
    if instrumentation == "openinference-anthropic":
        total_input = _anthropic_total_input(usage)
        expected = {
            "llm.token_count.prompt": total_input,  # includes both cache buckets
            "llm.token_count.completion": usage["output_tokens"],
            "llm.token_count.total": total_input + usage["output_tokens"],
        }
        # A cache figure of 0 is left out, although the API sends it.
        return _non_zero(
            expected,
            {
                "llm.token_count.prompt_details.cache_read": usage["cache_read_input_tokens"],
                "llm.token_count.prompt_details.cache_write": usage["cache_creation_input_tokens"],
            },
        )
    if instrumentation == "google-genai":
        thoughts = usage.get("thoughtsTokenCount", 0)
        expected = {
            "gen_ai.usage.input_tokens": usage["promptTokenCount"],  # includes the cached content
            "gen_ai.usage.output_tokens": usage["candidatesTokenCount"] + thoughts,
        }
        expected, absent = _non_zero(
            expected,
            {
                "gen_ai.usage.cache_read.input_tokens": usage.get("cachedContentTokenCount", 0),
                "gen_ai.usage.reasoning.output_tokens": thoughts,
            },
        )
        return expected, (
            *absent,
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_write.input_tokens",
        )
    if instrumentation == "openllmetry-openai":
        details = usage["prompt_tokens_details"]
        return {
            "gen_ai.usage.input_tokens": usage["prompt_tokens"],
            "gen_ai.usage.output_tokens": usage["completion_tokens"],
            "gen_ai.usage.total_tokens": usage["total_tokens"],
            "gen_ai.usage.cache_read.input_tokens": details["cached_tokens"],
            "gen_ai.usage.reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
        }, (  # cache_write_tokens is dropped even when sent; reasoning only under the old name
            "gen_ai.usage.cache_creation.input_tokens",
            "gen_ai.usage.cache_write.input_tokens",
            "gen_ai.usage.reasoning.output_tokens",
        )
    if instrumentation == "openllmetry-anthropic":
        total_input = _anthropic_total_input(usage)
        # Streaming: it adds message_delta's cumulative output_tokens to message_start's (a bug).
        output = usage["output_tokens"] + (STREAM_START_OUTPUT_TOKENS if call["streamed"] else 0)
        return {
            "gen_ai.usage.input_tokens": total_input,
            "gen_ai.usage.output_tokens": output,
            "gen_ai.usage.total_tokens": total_input + output,
            "gen_ai.usage.cache_read.input_tokens": usage["cache_read_input_tokens"],
            "gen_ai.usage.cache_creation.input_tokens": usage["cache_creation_input_tokens"],
        }, ("gen_ai.usage.cache_write.input_tokens",)
    if instrumentation == "pydantic-ai":
        if scenario.provider == "anthropic":
            expected = {
                "gen_ai.usage.input_tokens": _anthropic_total_input(usage),
                "gen_ai.usage.output_tokens": usage["output_tokens"],
                # the provider's own key is kept even when 0
                "gen_ai.usage.details.cache_read_input_tokens": usage["cache_read_input_tokens"],
            }
            expected, absent = _non_zero(
                expected,
                {
                    "gen_ai.usage.cache_read.input_tokens": usage["cache_read_input_tokens"],
                    "gen_ai.usage.cache_creation.input_tokens": usage["cache_creation_input_tokens"],
                    "gen_ai.usage.details.cache_read_tokens": usage["cache_read_input_tokens"],
                    "gen_ai.usage.details.cache_write_tokens": usage["cache_creation_input_tokens"],
                },
            )
            return expected, (*absent, "gen_ai.usage.cache_write.input_tokens")
        details = usage["prompt_tokens_details"]
        reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        expected = {
            "gen_ai.usage.input_tokens": usage["prompt_tokens"],
            "gen_ai.usage.output_tokens": usage["completion_tokens"],
            "gen_ai.usage.cache_read.input_tokens": details["cached_tokens"],
            "gen_ai.usage.details.cache_read_tokens": details["cached_tokens"],
            "gen_ai.usage.details.reasoning_tokens": reasoning,
        }
        absent = ["gen_ai.usage.reasoning.output_tokens"]
        if details.get("cache_write_tokens"):  # zero figures are left out
            expected["gen_ai.usage.cache_creation.input_tokens"] = details["cache_write_tokens"]
            expected["gen_ai.usage.details.cache_write_tokens"] = details["cache_write_tokens"]
        else:
            absent.append("gen_ai.usage.cache_creation.input_tokens")
        return expected, tuple(absent)
    raise ValueError(f"no usage expectations for {instrumentation}")
