"""Findings: typed, with a severity, the call and item, evidence, and a one-sentence fix.

Each rule returns candidates as ``(key, finding)``. A key names a condition that can persist from call
to call (a conflict, a crowded window, the same kind of cache break); the run reports it at the call
where it starts, not again while it lasts. Events (a dropped fact, a call to an unknown tool) have no
key and are always reported.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxcore.analysis import tools
from ctxcore.analysis.config import AnalysisConfig
from ctxcore.analysis.conflicts import CONFLICTING_VERSIONS, SUPERSEDED_INCLUDED
from ctxcore.analysis.inputs import CallInput
from ctxcore.catalogue import cause as cause_entry
from ctxcore.catalogue import finding_type, fix
from ctxcore.vocabulary import STANDING_KINDS, in_middle, position_shares

# Every type these rules raise, looked up at import: a type missing from the catalogue fails here.
CACHE_INVALIDATED = finding_type("cache_invalidated").name
INVISIBLE_INVALIDATOR = finding_type("invisible_invalidator").name
# Breaks worth knowing but no mistake: a prefix below the minimum, a compaction or edit the run asked for.
QUIET_CAUSES = frozenset({cause_entry("below_minimum").name, cause_entry("context_edited").name})
PINNED_DROPPED = finding_type("pinned_dropped").name
FACT_DROPPED = finding_type("fact_dropped").name
BUDGET_EXCEEDED = finding_type("budget_exceeded").name
OUTPUT_RESERVE_SQUEEZED = finding_type("output_reserve_squeezed").name
DUPLICATE_CONTENT = finding_type("duplicate_content").name
UNTRUSTED_IN_INSTRUCTIONS = finding_type("untrusted_in_instructions").name
LOST_IN_MIDDLE = finding_type("lost_in_middle").name
TOOL_RESULTS_DOMINANT = finding_type("tool_results_dominant").name
UNKNOWN_TOOL_CALLED = finding_type("unknown_tool_called").name
UNUSED_TOOLS = finding_type("unused_tools").name
QUADRATIC_HISTORY = finding_type("quadratic_history").name


@dataclass(frozen=True)
class Finding:
    type: str
    severity: str  # info | warning | error
    call_seq: int | None
    item_id: str | None = None
    cause: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fix(self) -> str:
        """One sentence saying what to change."""
        return fix(self.type, self.cause)

    def to_dict(self) -> dict:
        """The finding as the API serves it."""
        return {
            "type": self.type,
            "severity": self.severity,
            "call_seq": self.call_seq,
            "item_id": self.item_id,
            "cause": self.cause,
            "evidence": dict(self.evidence),
            "fix": self.fix,
        }


Candidate = tuple[str | None, Finding]


@dataclass(frozen=True)
class CallContext:
    """What a call's rules see besides the call: its analyses so far and the state carried to it."""

    cache: Mapping
    conflicts: Sequence[Mapping]
    buckets: Mapping
    previous_kept: Sequence[Sequence]
    previous_seq: int | None
    config: AnalysisConfig


def call_candidates(call: CallInput, context: CallContext) -> list[Candidate]:
    """Every rule that looks at one call, in order. A new rule is a function below and a line here."""
    config = context.config
    return [
        *cache_findings(call, context.cache),
        *conflict_findings(call, context.conflicts),
        *dropped_findings(call, context.previous_kept, context.previous_seq),
        *budget_findings(call, context.buckets),
        *window_findings(call, context.buckets, config.lost_in_middle_tokens, config.duplicate_tokens),
        *unknown_tool_findings(call),
    ]


def cache_findings(call: CallInput, cache: Mapping) -> list[Candidate]:
    """A cache break, an invisible invalidator, or a breakpoint below the minimum."""
    cause = cache["cause"]
    if cause is None:
        return []
    evidence = {
        key: cache[key]
        for key in (
            "reference_seq",
            "expected_read",
            "reported_read",
            "tokens_rewritten",
            "cost_usd",
            "provider_diagnosis",
            "disagrees",
        )
    }
    evidence["detail"] = dict(cache["detail"])
    if cause == "invisible":
        kind, severity = INVISIBLE_INVALIDATOR, "warning"
    else:
        kind, severity = CACHE_INVALIDATED, "info" if cause in QUIET_CAUSES else "warning"
    key = f"cache:{cause}:{cache['detail'].get('area', '')}"
    return [(key, Finding(kind, severity, call.seq, cache["invalidator_item_id"], cause, evidence))]


def conflict_findings(call: CallInput, conflicts: Sequence[Mapping]) -> list[Candidate]:
    """One finding per conflict of the call."""
    found: list[Candidate] = []
    for conflict in conflicts:
        kind = conflict["type"]
        if kind == CONFLICTING_VERSIONS:
            key = f"{kind}:{conflict['source']}:{sorted(conflict['versions'])}"
            item_id = conflict["item_ids"][0]
        elif kind == SUPERSEDED_INCLUDED:
            key = f"{kind}:{conflict['item_id']}:{conflict['superseded_by']}"
            item_id = conflict["item_id"]
        else:
            key = f"{kind}:{conflict['item_id']}:{conflict['version']}"
            item_id = conflict["item_id"]
        evidence = {name: value for name, value in conflict.items() if name != "type"}
        found.append((key, Finding(kind, "warning", call.seq, item_id, None, evidence)))
    return found


def dropped_findings(
    call: CallInput, previous_kept: Sequence[Sequence], previous_seq: int | None
) -> list[Candidate]:
    """Pinned items and facts or rules that were in the previous call and are gone from this one."""
    present = {item.id for item in call.items}
    superseded = {old for item in call.items for old in item.supersedes}
    reasons = {entry.id: entry.reason for entry in call.excluded}
    found: list[Candidate] = []
    for item_id, item_kind, pinned in previous_kept:
        if item_id in present or item_id in superseded or reasons.get(item_id) == "superseded":
            continue
        reason = reasons.get(item_id)
        evidence = {
            "kind": item_kind,
            "pinned": pinned,
            "previous_seq": previous_seq,
            "reason": reason,
            "without_reason": reason is None and call.manifest_source == "explicit",
        }
        kind, severity = (PINNED_DROPPED, "error") if pinned else (FACT_DROPPED, "warning")
        found.append((None, Finding(kind, severity, call.seq, item_id, None, evidence)))
    return found


def kept_items(call: CallInput) -> list[list]:
    """What the next call checks for drops: this call's pinned items and its facts and rules."""
    return [
        [item.id, item.kind, item.pinned] for item in call.items if item.pinned or item.kind in STANDING_KINDS
    ]


def budget_findings(call: CallInput, buckets: Mapping) -> list[Candidate]:
    """The window over the model's limit, or eating the space reserved for the answer."""
    budget = call.budget or {}
    limit = budget.get("limit")
    if not limit:
        return []
    used = call.usage.prompt_total
    if used is None:
        used = budget.get("input") if budget.get("input") is not None else buckets["items_total"]
    reserved = budget.get("reserved_output") or 0
    evidence = {"limit": limit, "input": used, "reserved_output": reserved, "free": limit - used}
    if used > limit:
        return [(BUDGET_EXCEEDED, Finding(BUDGET_EXCEEDED, "error", call.seq, None, None, evidence))]
    if reserved and used + reserved > limit:
        finding = Finding(OUTPUT_RESERVE_SQUEEZED, "warning", call.seq, None, None, evidence)
        return [(OUTPUT_RESERVE_SQUEEZED, finding)]
    return []


def window_findings(
    call: CallInput, buckets: Mapping, lost_in_middle_tokens: int, duplicate_tokens: int
) -> list[Candidate]:
    """Duplicated content, untrusted text among the instructions, pinned items lost in the middle."""
    found: list[Candidate] = []
    by_hash: dict[str, list] = {}
    for item in call.items:
        by_hash.setdefault(item.hash, []).append(item)
    for content_hash, group in by_hash.items():
        if len(group) < 2:
            continue
        wasted = sum(item.tokens or 0 for item in group[1:])
        if wasted < duplicate_tokens and all(item.tokens is not None for item in group):
            continue
        evidence = {"hash": content_hash, "item_ids": [item.id for item in group], "tokens": wasted}
        finding = Finding(DUPLICATE_CONTENT, "info", call.seq, group[1].id, None, evidence)
        found.append((f"duplicate_content:{content_hash}", finding))

    for item in call.items:
        if item.bucket == "system" and item.trust in ("tool", "external"):
            evidence = {"trust": item.trust, "source": item.source, "position": item.position}
            finding = Finding(UNTRUSTED_IN_INSTRUCTIONS, "warning", call.seq, item.id, None, evidence)
            found.append((f"untrusted_in_instructions:{item.id}", finding))

    window = buckets["total"]
    if window > lost_in_middle_tokens and call.items:
        shares = position_shares([item.tokens for item in call.items])
        for item, (_, centre) in zip(call.items, shares, strict=True):
            if item.pinned and in_middle(centre):
                evidence = {"position_share": round(centre, 3), "window_tokens": window}
                finding = Finding(LOST_IN_MIDDLE, "warning", call.seq, item.id, None, evidence)
                found.append((f"lost_in_middle:{item.id}", finding))
    return found


def tool_results_finding(call: CallInput, buckets: Mapping) -> Finding | None:
    """Tool results taking more than half the window (the run reports the first such call only)."""
    total = buckets["total"]
    share = buckets["parts"]["tool_results"] / total if total else 0
    if share <= 0.5:
        return None
    evidence = {
        "share": round(share, 3),
        "tool_results_tokens": buckets["parts"]["tool_results"],
        "window": total,
    }
    return Finding(TOOL_RESULTS_DOMINANT, "info", call.seq, None, None, evidence)


def unknown_tool_findings(call: CallInput) -> list[Candidate]:
    """Each tool the model asked for that its catalogue did not offer."""
    offered = tools.catalogue(call)
    if offered is None:
        return []
    return [
        (
            None,
            Finding(
                UNKNOWN_TOOL_CALLED,
                "warning",
                call.seq,
                None,
                None,
                {"tool": name, "offered": sorted(offered)},
            ),
        )
        for name in tools.called_names(call)
        if name not in offered
    ]


def unused_tools_finding(
    usage: Mapping[str, Sequence[int | None]], called: Sequence[str], billed_input: int | None
) -> Finding | None:
    """Tools offered in the run and never called, with what their definitions cost (tokens x calls)."""
    called = set(called)
    unused = [
        {"name": name, "calls": calls, "tokens": tokens}
        for name, (calls, tokens) in sorted(usage.items())
        if name not in called
    ]
    if not unused:
        return None
    known = [entry["tokens"] for entry in unused if entry["tokens"] is not None]
    # Tools without a definition in the window (unknown tokens) make the figures a floor.
    total = sum(known) if known else None
    share = total / billed_input if billed_input and total is not None else None
    if share is not None and share > 1:
        # Estimated definition tokens over the billed input of the calls that reported it (some may not
        # have): more than the whole bill says the two do not cover the same calls. Unknown, not >100 %.
        share = None
    evidence = {
        "tools": unused,
        "tokens": total,
        "share_of_billed_input": round(share, 4) if share is not None else None,
    }
    if len(known) < len(unused):
        evidence["tokens_unknown_for"] = [entry["name"] for entry in unused if entry["tokens"] is None]
    severity = "warning" if share is not None and share >= 0.1 else "info"
    return Finding(UNUSED_TOOLS, severity, None, None, None, evidence)


def quadratic_history_finding(
    billed_input: int | None, final_window: int | None, calls: int, threshold: float
) -> Finding | None:
    """The run's billed input many times its final window: history re-sent on every call."""
    if not billed_input or not final_window:
        return None
    ratio = billed_input / final_window
    if ratio < threshold:
        return None
    evidence = {
        "billed_input": billed_input,
        "final_window": final_window,
        "ratio": round(ratio, 2),
        "calls": calls,
    }
    return Finding(QUADRATIC_HISTORY, "warning", None, None, None, evidence)
