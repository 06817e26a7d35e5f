"""Analyse a run one call at a time, from a small carried state, and sum it up at the end.

``analyse_call(state, call)`` needs only the call and the state after the previous call; the state is a
JSON-serialisable dict whose size does not grow with the number of calls:
- ``recent``: the chains (and item ids, hashes, buckets, token prefix sums) of recent calls that cached
  something and whose cache is still alive: at most ``config.recent_calls`` per chain (an agent, or a
  nested invocation of it), of at most ``config.agents_kept`` chains (the least recently cached leaves
  first);
- ``versions``: per source, the ranks of its latest versions (bounded by the number of sources);
- ``lanes``: per agent (``CallInput.agent``; None is one lane for calls that name no agent), its previous
  call's invocation (a nested invocation starts afresh), pinned items and facts or rules (``kept``), the
  keys of the conditions found on its previous call (``active``: a persisting condition is reported
  once, where it starts), tools offered and called, and its billed input and last window; at most
  ``config.agents_kept`` lanes, most recently used first;
  ``retired``: the lanes evicted beyond that, folded into one (their run-level findings still count);
- ``calibration``: the sums of the run's (estimated, reported) cache reads (``calibration.py``);
- ``totals``: the run's sums for accounting.
Results depend only on the sequence of calls: re-running from any stored state gives the same answers.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from ctxcore.analysis import accounting, calibration, conflicts, findings, prices, tools
from ctxcore.analysis.buckets import bucket_tokens
from ctxcore.analysis.cache import CONTEXT_EDITED, INVISIBLE, analyse_cache
from ctxcore.analysis.config import DEFAULT_CONFIG, AnalysisConfig
from ctxcore.analysis.findings import Finding
from ctxcore.analysis.inputs import CallInput

# 2: per-agent chains and lanes, the run's cache calibration; 3: a nested invocation of an agent is a
# chain of its own (``invocation`` on recent entries and lanes); 4: lanes count the calls whose tool
# results do not name their tool (``unsaid_calls``); 5: the accounting's cost bounds of calls priced but
# not split into cache parts (``ranged_calls``, ``cost_low``, ``cost_high``).
STATE_SCHEMA = 5


class OutOfOrder(ValueError):
    """A call at or before the state's last call: re-run from the state stored before it."""


class OutdatedState(ValueError):
    """A state written by another version of the analyses: re-run the run from its first call."""


@dataclass(frozen=True)
class CallAnalysis:
    seq: int
    buckets: dict
    cache: dict
    conflicts: list = field(default_factory=list)
    findings: tuple[Finding, ...] = ()

    def to_dict(self) -> dict:
        """The analysis as plain, storable data."""
        return {
            "seq": self.seq,
            "buckets": self.buckets,
            "cache": self.cache,
            "conflicts": self.conflicts,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def new_state() -> dict:
    """The state before a run's first call."""
    return {
        "schema": STATE_SCHEMA,
        "seq": None,
        "recent": [],
        "versions": {},
        "once": [],
        "lanes": [],
        "retired": None,
        "calibration": calibration.new_sums(),
        "totals": accounting.new_totals(),
    }


def new_lane(agent: str | None) -> dict:
    """What the state keeps of one agent before its first call."""
    return {
        "agent": agent,
        "invocation": None,
        "seq": None,
        "kept": [],
        "active": [],
        "tools": {},
        "called": [],
        "unsaid_calls": 0,
        "calls": 0,
        "prompt_calls": 0,
        "billed": 0,
        "window": None,
    }


def _updated_lane(lane: Mapping, call: CallInput, window: int, active: list[str]) -> dict:
    prompt = call.usage.prompt_total
    return {
        "agent": call.agent,
        "invocation": call.invocation,
        "seq": call.seq,
        "kept": findings.kept_items(call),
        "active": active,
        "tools": tools.updated_usage(lane["tools"], call),
        "called": sorted({*lane["called"], *tools.called_names(call), *tools.answered_names(call)}),
        "unsaid_calls": lane["unsaid_calls"] + (not tools.says_what_it_called(call)),
        "calls": lane["calls"] + 1,
        "prompt_calls": lane["prompt_calls"] + (prompt is not None),
        "billed": lane["billed"] + (prompt or 0),
        "window": window,
    }


def _retire(retired: Mapping | None, lanes: list[Mapping]) -> dict | None:
    """Lanes evicted from the state fold into one: their tools and sums still count at the run's end.

    An evicted agent that calls again starts a new lane (the fold keeps what it did before)."""
    if not lanes:
        return dict(retired) if retired is not None else None
    folded = dict(retired) if retired is not None else {**new_lane(None), "agents": 0, "window": 0}
    for lane in lanes:
        usage = dict(folded["tools"])
        for name, (calls, tokens) in lane["tools"].items():
            before = usage.get(name, (0, 0))
            usage[name] = [before[0] + calls, tools.add_tokens(before[1], tokens)]
        folded = {
            **folded,
            "agents": folded["agents"] + 1,
            "tools": usage,
            "called": sorted({*folded["called"], *lane["called"]}),
            "unsaid_calls": folded["unsaid_calls"] + lane["unsaid_calls"],
            "calls": folded["calls"] + lane["calls"],
            "prompt_calls": folded["prompt_calls"] + lane["prompt_calls"],
            "billed": folded["billed"] + lane["billed"],
            "window": folded["window"] + (lane["window"] or 0),  # the sum of their final windows
        }
    return folded


def analyse_call(
    state: Mapping | None, call: CallInput, config: AnalysisConfig = DEFAULT_CONFIG
) -> tuple[CallAnalysis, dict]:
    """One call's buckets, cache reuse and break, conflicts and findings, and the state after it.

    What compares a call with "the previous call" (cache chains, dropped items, persisting conditions,
    tools offered and called) compares it with the previous call of its own agent: its *lane*.
    """
    state = state or new_state()
    if state.get("schema") != STATE_SCHEMA:
        raise OutdatedState(f"state schema {state.get('schema')!r}, expected {STATE_SCHEMA}")
    if state["seq"] is not None and call.seq <= state["seq"]:
        raise OutOfOrder(f"call {call.seq} comes at or before call {state['seq']} of this state")

    lane = next((lane for lane in state["lanes"] if lane["agent"] == call.agent), None) or new_lane(
        call.agent
    )
    if lane["seq"] is not None and lane["invocation"] != call.invocation:
        # Another invocation of the agent: a fresh conversation, so nothing of the previous one's window
        # was dropped and no condition persists (its tools and sums still count for the agent).
        lane = {**lane, "seq": None, "kept": [], "active": []}
    buckets = bucket_tokens(call.items, call.usage.prompt_total)
    price = prices.price_for(call.model, config.prices)
    fit = calibration.fit(state["calibration"])
    cache, recent = analyse_cache(
        call, state["recent"], buckets, price, config.recent_calls, config.agents_kept, fit
    )
    found_conflicts = conflicts.call_conflicts(call.items, state["versions"])

    context = findings.CallContext(cache, found_conflicts, buckets, lane["kept"], lane["seq"], config)
    candidates = findings.call_candidates(call, context)
    once = state["once"]
    dominant = findings.tool_results_finding(call, buckets)
    if dominant is not None and dominant.type not in once:
        candidates.append((None, dominant))
        once = sorted([*once, dominant.type])

    active = set(lane["active"])
    reported = tuple(finding for key, finding in candidates if key is None or key not in active)
    lane = _updated_lane(
        lane, call, buckets["total"], sorted({key for key, _ in candidates if key is not None})
    )
    lanes = [lane, *(other for other in state["lanes"] if other["agent"] != call.agent)]
    # A read against a cache that was partly lost (or cleared by a context edit) says nothing about our
    # tokenizer.
    sums = state["calibration"]
    if cache["cause"] not in (INVISIBLE, CONTEXT_EDITED):
        sums = calibration.observed(sums, cache["reusable_tokens"], cache["reported_read"])
    after = {
        "schema": STATE_SCHEMA,
        "seq": call.seq,
        "recent": recent,
        "versions": conflicts.updated_index(state["versions"], call.items),
        "once": once,
        "lanes": lanes[: config.agents_kept],
        "retired": _retire(state["retired"], lanes[config.agents_kept :]),
        "calibration": sums,
        "totals": accounting.updated_totals(state["totals"], call, buckets["total"], price, cache),
    }
    return CallAnalysis(call.seq, buckets, cache, found_conflicts, reported), after


def _lane_findings(lane: Mapping, config: AnalysisConfig) -> list[Finding]:
    """Unused tools and quadratic history of one agent (or of the agents the state retired)."""
    billed = lane["billed"] if lane["prompt_calls"] else None
    found = [
        # A call recorded without its content may have called any tool: then none is known to be unused.
        findings.unused_tools_finding(lane["tools"], lane["called"], billed)
        if not lane["unsaid_calls"]
        else None,
        findings.quadratic_history_finding(billed, lane["window"], lane["calls"], config.quadratic_ratio),
    ]
    if lane["agent"] is None and "agents" not in lane:
        return [finding for finding in found if finding is not None]  # a run without agents, as ever
    scope = (
        {"agent": lane["agent"]}
        if "agents" not in lane
        else {"agent": None, "retired_agents": lane["agents"]}
    )
    return [
        replace(finding, evidence={**finding.evidence, **scope}) for finding in found if finding is not None
    ]


def finalise_run(state: Mapping, config: AnalysisConfig = DEFAULT_CONFIG) -> dict:
    """Run-level findings (unused tools, quadratic history, per agent) and the run's accounting."""
    lanes = sorted(state["lanes"], key=lambda lane: (lane["agent"] is not None, lane["agent"] or ""))
    if state["retired"] is not None:
        lanes.append(state["retired"])
    run_findings = [finding for lane in lanes for finding in _lane_findings(lane, config)]
    return {
        "findings": [finding.to_dict() for finding in run_findings],
        "accounting": accounting.summary(state["totals"]),
    }
