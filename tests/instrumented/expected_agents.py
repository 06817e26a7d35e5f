"""What ctxview SHOULD derive from the scenarios of issue 14 (multi-agent frameworks and the
instrumentation quirks ctxview gets wrong today).

This is the target for the per-family work, not today's behaviour: where today's ctxview differs
(README.md, "What ctxview makes of the issue 14 scenarios today"), the live tests check only what it
already gets right. The tests in test_instrumented.py check these expectations against the
recordings themselves (agent spans, the system prompts the fake provider received).

Calls are named by their index in the scenario's description (``calls[i]``, in request order).
Terms (design.md, "Sessions and agents"): a run is a session; each call belongs to an *agent
invocation*, entered at the root, by a handoff, as a tool (agent-as-tool) or by delegation (a child
run inside a tool of its parent). Switching agents is never a cache break.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.instrumented.expected import USAGE_FIELDS


@dataclass(frozen=True)
class Invocation:
    id: str  # "<agent>#<n>": the n-th invocation of that agent in its session
    agent: str
    calls: tuple[int, ...]
    parent: str | None = None  # the id of the invocation it was entered from
    entered: str = "root"  # root | handoff | agent_as_tool | delegation


@dataclass(frozen=True)
class Session:
    calls: tuple[int, ...]  # in order: seq 1, 2, ...
    turns: tuple[tuple[int, ...], ...]  # the calls of each turn
    agent: str | None = None  # the run's agent: the root invocation's
    invocations: tuple[Invocation, ...] = ()


@dataclass(frozen=True)
class Outcome:
    sessions: tuple[Session, ...]
    cache_breaks: frozenset[int] = frozenset()  # calls where the prompt cache genuinely broke
    unknown: tuple[str, ...] = ()  # usage fields the instrumentation never reports (null, never 0)


def _by_trace(*turns: tuple[int, ...]) -> tuple[Session, ...]:
    """The shared two-turn conversation driven by the SDK alone: one trace, so one session, per turn."""
    return tuple(Session(calls=turn, turns=(turn,)) for turn in turns)


EXPECTED: dict[str, Outcome] = {
    # One trace; triage (calls 0, 1) hands off to billing (calls 2, 3). Billing's first call reads no
    # cache because its prefix (its own instructions and tools) is new: not a break.
    "openai-agents-handoff": Outcome(
        sessions=(
            Session(
                calls=(0, 1, 2, 3),
                turns=((0, 1, 2, 3),),
                agent="triage_agent",
                invocations=(
                    Invocation("triage_agent#1", "triage_agent", (0, 1)),
                    Invocation("billing_agent#1", "billing_agent", (2, 3), "triage_agent#1", "handoff"),
                ),
            ),
        ),
    ),
    # The orchestrator (calls 0, 3) runs billing (calls 1, 2) as its tool ask_billing_agent; its call 3
    # reads its own cached prefix again: no break, and still the one user turn.
    "openai-agents-as-tool": Outcome(
        sessions=(
            Session(
                calls=(0, 1, 2, 3),
                turns=((0, 1, 2, 3),),
                agent="orchestrator",
                invocations=(
                    Invocation("orchestrator#1", "orchestrator", (0, 3)),
                    Invocation("billing_agent#1", "billing_agent", (1, 2), "orchestrator#1", "agent_as_tool"),
                ),
            ),
        ),
    ),
    # The weather expert's run has its own gen_ai.conversation.id but belongs in the planner's session.
    "pydantic-ai-delegation": Outcome(
        sessions=(
            Session(
                calls=(0, 1, 2, 3),
                turns=((0, 1, 2, 3),),
                agent="planner",
                invocations=(
                    Invocation("planner#1", "planner", (0, 3)),
                    Invocation("weather_expert#1", "weather_expert", (1, 2), "planner#1", "delegation"),
                ),
            ),
        ),
    ),
    # Same, but the planner's instructions change between its two calls ("Planning step 1." -> "2."):
    # its call 3 writes its prefix again. That one is a genuine break.
    "pydantic-ai-delegation-cachebreak": Outcome(
        sessions=(
            Session(
                calls=(0, 1, 2, 3),
                turns=((0, 1, 2, 3),),
                agent="planner",
                invocations=(
                    Invocation("planner#1", "planner", (0, 3)),
                    Invocation("weather_expert#1", "weather_expert", (1, 2), "planner#1", "delegation"),
                ),
            ),
        ),
        cache_breaks=frozenset({3}),
    ),
    # Two user turns; in each the lead (calls 0, 2 / 3, 5) runs the researcher (call 1 / 4) from its tool.
    # Each researcher run is a new invocation of the same agent (a new conversation id): its call 4 is
    # the first of a new chain, not a break against call 1 (issue 33).
    "pydantic-ai-researcher-twice": Outcome(
        sessions=(
            Session(
                calls=(0, 1, 2, 3, 4, 5),
                turns=((0, 1, 2), (3, 4, 5)),
                agent="lead",
                invocations=(
                    Invocation("lead#1", "lead", (0, 2)),
                    Invocation("researcher#1", "researcher", (1,), "lead#1", "delegation"),
                    Invocation("lead#2", "lead", (3, 5)),
                    Invocation("researcher#2", "researcher", (4,), "lead#2", "delegation"),
                ),
            ),
        ),
    ),
    # The API sends cache_read_input_tokens: 0 / cache_creation_input_tokens: 0; OpenInference leaves
    # them out, but they are known zeros, so uncached is known too.
    "openinference-anthropic-zerocache": Outcome(sessions=_by_trace((0, 1), (2,))),
    # Gemini: promptTokenCount includes the cached content; a missing cachedContentTokenCount or
    # thoughtsTokenCount is 0 (the API leaves zeros out); no per-request cache writes.
    "google-genai": Outcome(sessions=_by_trace((0, 1), (2,))),
    # openai-v2's Chat Completions path reports neither cache nor reasoning figures, streamed or not.
    "openai-v2-stream": Outcome(
        sessions=_by_trace((0, 1), (2,)), unknown=("uncached", "cache_write", "cache_read", "reasoning")
    ),
    "openinference-openai-responses": Outcome(sessions=_by_trace((0, 1), (2,))),
    # OpenLLMetry drops prompt_tokens_details.cache_write_tokens (1024 on call 0), so cache writes, and
    # with them the uncached remainder, are unknown.
    "openllmetry-openai": Outcome(sessions=_by_trace((0, 1), (2,)), unknown=("uncached", "cache_write")),
}


# Where today's ctxview (ingest @ this branch's base) does not give the outcome above: the live test
# (test_normalised.py) checks every other aspect, and the family work removes an entry with its fix.
# Aspects: "usage:<field>", "finish_reasons", "cache_breaks", "sessions" (runs, their calls and
# turns), "run_agent" (the run's agent name), "agents" (each call's agent and invocation:
# checked by test_agents.py).
DIFFERS_TODAY: dict[str, frozenset[str]] = {
    # Sessions, agents and invocations (ingest.agents, ingest.agent_sessions), one cache chain per agent
    # (ctxcore.analysis.cache), omitted zeros, dropped figures, Gemini's names and every finish reason
    # (ingest/families/providers.py): nothing differs any more.
    "openai-agents-handoff": frozenset(),
    "openai-agents-as-tool": frozenset(),
    "pydantic-ai-delegation": frozenset(),
    "pydantic-ai-delegation-cachebreak": frozenset(),
    "pydantic-ai-researcher-twice": frozenset(),
    "openinference-anthropic-zerocache": frozenset(),
    "google-genai": frozenset(),
    "openai-v2-stream": frozenset(),
    "openinference-openai-responses": frozenset(),
    "openllmetry-openai": frozenset(),
}


def expected_usage(name: str, call: dict) -> dict:
    """Call ``call``'s usage as ctxview should show it: the provider's figures, null where not reported."""
    canonical = call["canonical"]
    usage = {
        "uncached": canonical["uncached_input"],
        "cache_write": canonical["cache_write"],
        "cache_read": canonical["cache_read"],
        "output": canonical["output"],
        "reasoning": canonical["reasoning"],
        "prompt_total": canonical["input_total"],
    }
    assert set(usage) == set(USAGE_FIELDS)
    for field in EXPECTED[name].unknown:
        usage[field] = None
    return usage


def usage_right_today(name: str, call: dict) -> dict:
    """``expected_usage`` less the fields DIFFERS_TODAY lists: what a test can check today."""
    usage = expected_usage(name, call)
    return {field: value for field, value in usage.items() if f"usage:{field}" not in DIFFERS_TODAY[name]}


def expected_finish_reasons(call: dict) -> tuple[str, ...]:
    """In the OTel vocabulary: ``tool_call`` when the model asked for tools, else ``stop``.

    Emitters say it differently (``tool_calls``, ``tool_use``, ``end_turn``, Gemini's ``STOP`` even for
    function calls, openai-agents' ``stop`` for every completed response) or not at all (openai-v2
    streaming puts it on the output messages only; OpenInference's Responses spans have none).
    """
    return ("tool_call",) if call["tool_calls"] else ("stop",)


def invocation_of(name: str, index: int) -> tuple[Session, Invocation | None]:
    """The session and the agent invocation that call ``index`` of scenario ``name`` belongs to."""
    for session in EXPECTED[name].sessions:
        if index in session.calls:
            for invocation in session.invocations:
                if index in invocation.calls:
                    return session, invocation
            return session, None
    raise KeyError(f"{name}: call {index} is in no session")
