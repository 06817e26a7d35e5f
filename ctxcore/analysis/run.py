"""Analyse a run one call at a time, from a small carried state, and sum it up at the end.

``analyse_call(state, call)`` needs only the call and the state after the previous call; the state is a
JSON-serialisable dict whose size does not grow with the number of calls:
- ``recent``: the chains (and item ids, hashes, buckets, token prefix sums) of at most
  ``config.recent_calls`` recent calls that cached something and whose cache is still alive;
- ``versions``: per source, the ranks of its latest versions (bounded by the number of sources);
- ``kept``: the previous call's pinned items and facts or rules; ``active``: the keys of the conditions
  found on the previous call (to report a persisting condition once, where it starts);
- ``tools``/``called``: per tool name, catalogue calls and tokens, and the names called;
- ``totals``: the run's sums for accounting.
Results depend only on the sequence of calls: re-running from any stored state gives the same answers.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxcore.analysis import accounting, conflicts, findings, prices, tools
from ctxcore.analysis.buckets import bucket_tokens
from ctxcore.analysis.cache import analyse_cache
from ctxcore.analysis.config import DEFAULT_CONFIG, AnalysisConfig
from ctxcore.analysis.findings import Finding
from ctxcore.analysis.inputs import CallInput

STATE_SCHEMA = 1


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
        "kept": [],
        "active": [],
        "once": [],
        "tools": {},
        "called": [],
        "totals": accounting.new_totals(),
    }


def analyse_call(
    state: Mapping | None, call: CallInput, config: AnalysisConfig = DEFAULT_CONFIG
) -> tuple[CallAnalysis, dict]:
    """One call's buckets, cache reuse and break, conflicts and findings, and the state after it."""
    state = state or new_state()
    if state.get("schema") != STATE_SCHEMA:
        raise OutdatedState(f"state schema {state.get('schema')!r}, expected {STATE_SCHEMA}")
    if state["seq"] is not None and call.seq <= state["seq"]:
        raise OutOfOrder(f"call {call.seq} comes at or before call {state['seq']} of this state")

    buckets = bucket_tokens(call.items, call.usage.prompt_total)
    price = prices.price_for(call.model, config.prices)
    cache, recent = analyse_cache(call, state["recent"], buckets, price, config.recent_calls)
    found_conflicts = conflicts.call_conflicts(call.items, state["versions"])

    context = findings.CallContext(cache, found_conflicts, buckets, state["kept"], state["seq"], config)
    candidates = findings.call_candidates(call, context)
    once = state["once"]
    dominant = findings.tool_results_finding(call, buckets)
    if dominant is not None and dominant.type not in once:
        candidates.append((None, dominant))
        once = sorted([*once, dominant.type])

    active = set(state["active"])
    reported = tuple(finding for key, finding in candidates if key is None or key not in active)
    after = {
        "schema": STATE_SCHEMA,
        "seq": call.seq,
        "recent": recent,
        "versions": conflicts.updated_index(state["versions"], call.items),
        "kept": findings.kept_items(call),
        "active": sorted({key for key, _ in candidates if key is not None}),
        "once": once,
        "tools": tools.updated_usage(state["tools"], call),
        "called": sorted({*state["called"], *tools.called_names(call)}),
        "totals": accounting.updated_totals(state["totals"], call, buckets["total"], price, cache),
    }
    return CallAnalysis(call.seq, buckets, cache, found_conflicts, reported), after


def finalise_run(state: Mapping, config: AnalysisConfig = DEFAULT_CONFIG) -> dict:
    """Run-level findings (unused tools, quadratic history) and the run's accounting, from the last state."""
    summary = accounting.summary(state["totals"])
    run_findings = [
        findings.unused_tools_finding(state["tools"], state["called"], summary["billed_input"]),
        findings.quadratic_history_finding(
            summary["billed_input"], summary["final_window"], summary["calls"], config.quadratic_ratio
        ),
    ]
    return {
        "findings": [finding.to_dict() for finding in run_findings if finding is not None],
        "accounting": summary,
    }
