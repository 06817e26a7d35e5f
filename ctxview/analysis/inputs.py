"""What the analyses read: one model call of a run, as plain frozen data. No Django here.

``CallInput.from_dict`` accepts the shapes stored on ``ingest.models.Call`` today: items as stored
(fields at their default may be missing, position is the index), usage split into its six figures
(None = unknown, never 0), the raw usage attributes, exclusions, budget, tool calls and definitions.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BUCKETS = ("system", "tools", "conversation", "tool_results", "retrieved", "memory", "summary", "other")

# The defaults ingest leaves out of stored items (ingest/items.py ITEM_DEFAULTS), repeated so this
# package imports nothing from ingest.
_ITEM_DEFAULTS: dict[str, Any] = {
    "role": None,
    "tokens": None,
    "tokens_estimated": True,
    "mode": "verbatim",
    "version": None,
    "source": None,
    "trust": None,
    "supersedes": (),
    "pinned": False,
    "origin_turn": None,
    "cache_breakpoint": False,
}


@dataclass(frozen=True)
class Item:
    id: str
    kind: str
    bucket: str
    hash: str
    position: int
    role: str | None = None
    tokens: int | None = None
    tokens_estimated: bool = True
    mode: str = "verbatim"
    version: str | None = None
    source: str | None = None
    trust: str | None = None
    supersedes: tuple[str, ...] = ()
    pinned: bool = False
    origin_turn: int | None = None
    cache_breakpoint: bool = False

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], position: int) -> "Item":
        """An item from its stored dict; missing fields take ingest's defaults."""
        values = {key: data.get(key, default) for key, default in _ITEM_DEFAULTS.items()}
        values["supersedes"] = tuple(values["supersedes"] or ())
        bucket = data.get("bucket") or "other"
        return cls(
            id=str(data["id"]),
            kind=str(data.get("kind") or ""),
            bucket=bucket if bucket in BUCKETS else "other",
            hash=str(data["hash"]),
            position=position,
            **values,
        )


@dataclass(frozen=True)
class Excluded:
    id: str
    reason: str
    tokens: int | None = None
    kind: str | None = None
    source: str | None = None
    version: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Excluded":
        """An excluded candidate from its stored dict."""
        return cls(
            id=str(data["id"]),
            reason=str(data.get("reason") or ""),
            tokens=data.get("tokens"),
            kind=data.get("kind"),
            source=data.get("source"),
            version=data.get("version"),
        )


@dataclass(frozen=True)
class Usage:
    uncached: int | None = None
    cache_write: int | None = None
    cache_read: int | None = None
    output: int | None = None
    reasoning: int | None = None
    prompt_total: int | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Usage":
        """The usage split; a figure that is missing stays unknown (None)."""
        data = data or {}
        return cls(**{name: data.get(name) for name in cls.__dataclass_fields__})


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
            contents=dict(data.get("contents") or {}),
        )
