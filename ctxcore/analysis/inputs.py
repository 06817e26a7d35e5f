"""What the analyses read: one model call of a run, as plain frozen data. No Django here.

``CallInput.from_dict`` accepts the shapes stored on ``ingest.models.Call`` today: items as stored
(fields at their default may be missing, position is the index), usage split into its six figures
(None = unknown, never 0), the raw usage attributes, exclusions, budget, tool calls and definitions.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxcore.vocabulary import Excluded, Item, Usage

AGENT_CHARS = 200  # as ingest stores an agent name; a trace's text is never trusted to be short


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
    # Tools its agent's span declares beside the call's own: its sub-agents (``tools.offered``).
    agent_tools: tuple[str, ...] = ()
    # Hash -> content text, where known: this call's items and, for byte diffs of a cache break, the
    # previous call's (Content rows are keyed by hash, so one query fetches both).
    contents: Mapping[str, str] = field(default_factory=dict)
    # The agent invocation lineage the call belongs to ("triage", "billing", a subagent id); None when the
    # trace names no agent. Each agent has its own prompt, tools and so its own cache chain.
    agent: str | None = None
    # The nested invocation of that agent the call runs in (a sub-agent run by a tool or by delegation):
    # each such invocation is a fresh conversation, so its own cache chain, never a break against another
    # invocation. None at the top level, where an agent's invocations (its turns) continue one chain.
    invocation: str | None = None

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], read_item: Callable[[Mapping[str, Any], int], Item] = Item.from_dict
    ) -> "CallInput":
        """A call from the dict the database layer builds from ``ingest.models.Call``; ``read_item``
        makes each item (an ``ItemReader``, to share the items of several calls)."""
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
            items=tuple(read_item(item, index) for index, item in enumerate(data.get("items") or ())),
            excluded=tuple(Excluded.from_dict(entry) for entry in data.get("excluded") or ()),
            manifest_source=str(data.get("manifest_source") or "none"),
            budget=data.get("budget"),
            tool_calls=tuple(data.get("tool_calls") or ()),
            tool_definitions=tuple(str(name) for name in definitions) if definitions is not None else None,
            agent_tools=tuple(str(name) for name in data.get("agent_tools") or ()),
            contents=dict(data.get("contents") or {}),
            agent=str(data["agent"])[:AGENT_CHARS] if data.get("agent") else None,
            invocation=str(data["invocation"])[:AGENT_CHARS] if data.get("invocation") else None,
        )

    @property
    def chain(self) -> tuple[str | None, str | None]:
        """The cache chain the call continues: its agent and, for a nested run, that invocation."""
        return self.agent, self.invocation
