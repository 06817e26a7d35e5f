"""What the analyses read: one model call of a run, as plain frozen data. No Django here.

``CallInput.from_dict`` accepts the shapes stored on ``ingest.models.Call`` today: items as stored
(fields at their default may be missing, position is the index), usage split into its six figures
(None = unknown, never 0), the raw usage attributes, exclusions, budget, tool calls and definitions.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxcore.vocabulary import Excluded, Item, Usage


@dataclass(frozen=True)
class CallInput:
    """One model call of a run, in the run's order (``seq``), with its manifest and usage."""

    seq: int
    turn: int | None
    start_ns: int
    end_ns: int
    model: str
    provider: str
    usage: Usage
    usage_raw: Mapping[str, Any] = field(default_factory=dict)
    items: tuple[Item, ...] = ()
    excluded: tuple[Excluded, ...] = ()
    manifest_source: str = "none"  # explicit | derived | none
    budget: Mapping[str, int | None] | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    tool_definitions: tuple[str, ...] | None = None  # None: the call did not report its catalogue
    # The agent that made the call within its run ("" for the main agent): a subagent's first call
    # starts a cache lineage of its own, it breaks no other agent's cache.
    agent: str = ""
    # Hash -> content text, where known: this call's items and, for byte diffs of a cache break, the
    # previous call's (Content rows are keyed by hash, so one query fetches both).
    contents: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CallInput":
        """A call from the dict the database layer builds from ``ingest.models.Call``."""
        definitions = data.get("tool_definitions")
        return cls(
            seq=int(data["seq"]),
            turn=data.get("turn"),
            start_ns=int(data["start_ns"]),
            end_ns=int(data.get("end_ns") or data["start_ns"]),
            model=str(data.get("model") or ""),
            provider=str(data.get("provider") or ""),
            usage=Usage.from_dict(data.get("usage")),
            usage_raw=dict(data.get("usage_raw") or {}),
            items=tuple(Item.from_dict(item, index) for index, item in enumerate(data.get("items") or ())),
            excluded=tuple(Excluded.from_dict(entry) for entry in data.get("excluded") or ()),
            manifest_source=str(data.get("manifest_source") or "none"),
            budget=data.get("budget"),
            tool_calls=tuple(data.get("tool_calls") or ()),
            tool_definitions=tuple(str(name) for name in definitions) if definitions is not None else None,
            agent=str(data.get("agent") or ""),
            contents=dict(data.get("contents") or {}),
        )
