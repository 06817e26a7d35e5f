"""The words every layer shares: an item of a context window, its fields and defaults, the buckets and
modes, exclusion reasons, usage figures, the content hash, and where "the middle" of a window is.

No Django here. The write side builds these from traces, the analyses read them, the read side shows
them, the SDK sends them: each defines none of it again.
"""

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

BUCKETS = ("system", "tools", "conversation", "tool_results", "retrieved", "memory", "summary", "other")
ROLES = ("system", "user", "assistant", "tool")
MODES = ("verbatim", "excerpt", "summary", "reference")
TRUST_LEVELS = ("system", "user", "tool", "external")
# Suggested, not enforced: a sender may use its own words for kinds (and for exclusion reasons).
KINDS = (
    "tool",
    "system",
    "message",
    "tool_call",
    "tool_result",
    "file",
    "retrieved",
    "memory",
    "summary",
    "plan",
    "progress",
    "artifact_ref",
    "fact",
    "rule",
)

# Items whose loss from the window is a finding (fact_dropped) and is worth explaining first.
STANDING_KINDS = ("fact", "rule")

# The reasons a context builder gives for leaving a candidate out (the sender may use its own words).
EXCLUSION_REASONS = {
    "superseded": "a newer version replaced it",
    "stage_complete": "the stage it served is finished",
    "budget": "it did not fit the token budget",
    "sliding_window": "it fell out of the sliding window of recent turns",
    "compacted": "a summary replaced it",
    "duplicate": "the same content is already in the window",
    "irrelevant": "the builder judged it irrelevant",
    "untrusted": "its source is not trusted",
    "expired": "it is out of date",
}

# The stored form of an item leaves out fields at their default (a long run stores many items).
REQUIRED_ITEM_FIELDS = ("id", "kind", "bucket", "hash")
ITEM_DEFAULTS: Mapping[str, Any] = {
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

# What ``Item.from_dict`` starts from: the stored fields' defaults, and the fields never stored.
_UNSTORED_DEFAULTS: Mapping[str, Any] = {**ITEM_DEFAULTS, "content": None, "content_truncated": False}

# Content kept per item; the hash and the token estimate always cover the whole of it.
CONTENT_LIMIT = 262_144

# The middle of the window, as position shares, where a pinned item is "lost" (models read it least).
MIDDLE = (0.2, 0.8)


def digest(text: str) -> str:
    """The content hash used everywhere: the first 32 hex characters of SHA-256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def message_id(rendered_digest: str) -> str:
    """A message's id, the one rule of the SDK and the write side: ``msg:`` + the first 12 hex of the
    ``digest`` of a rendering of the message that names its role (the write side renders the whole
    message, role and parts; the SDK its role followed by its content), so the same message keeps its id
    from call to call and two roles saying the same words do not share one."""
    return "msg:" + rendered_digest[:12]


def evolve(instance: Any, **changes: Any) -> Any:
    """``dataclasses.replace`` without its per-field work, for a frozen dataclass with no
    ``__post_init__`` and no ``__slots__``, whose fields ``changes`` names (not checked here)."""
    made = object.__new__(type(instance))
    made.__dict__.update(instance.__dict__, **changes)
    return made


def render(value: Any) -> str:
    """Text of structured content, keeping the sender's key order (a reordering changes the hash).

    The server writes it faster (ingest.rendering), to the same bytes."""
    if isinstance(value, str):
        return value
    return _ENCODER.encode(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))  # json.dumps makes one per call


@dataclass(frozen=True)
class Item:
    """One piece of a call's context window, in render order (``position``)."""

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
    content: str | None = None  # where the write side has it; never part of the stored form
    content_truncated: bool = False

    @classmethod
    def made(cls, **fields: Any) -> "Item":
        """What the constructor makes of these fields (the required ones and any others), without
        setting all 18 one by one through the frozen ``__setattr__``: a batch makes an item per message
        of each call (1.5% of a batch's CPU through the constructor)."""
        item = object.__new__(cls)
        item.__dict__.update(_UNSTORED_DEFAULTS, **fields)
        return item

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], position: int) -> "Item":
        """An item from its stored dict; missing fields take their defaults, an unknown bucket is other.

        What the constructor would make, built as ``with_tokens`` builds: a stored item holds a few of
        the optional fields, and the frozen constructor set all 18 one by one. Reading a long run's
        calls back for its analysis went there (61% of re-analysing a 600-call run)."""
        bucket = data.get("bucket") or "other"
        item = object.__new__(cls)
        fields = item.__dict__
        fields.update(_UNSTORED_DEFAULTS)
        for key, value in data.items():
            if key in ITEM_DEFAULTS:
                fields[key] = value
        fields["supersedes"] = tuple(fields["supersedes"] or ())
        fields["id"] = str(data["id"])
        fields["kind"] = str(data.get("kind") or "")
        fields["bucket"] = bucket if bucket in BUCKETS else "other"
        fields["hash"] = str(data["hash"])
        fields["position"] = position
        return item

    def with_tokens(self, tokens: int) -> "Item":
        """This item with another token count (it was 4% of a batch's CPU through
        ``dataclasses.replace``, once per counted item)."""
        return evolve(self, tokens=tokens)

    def to_dict(self) -> dict:
        """The stored form: the required fields and those not at their default."""
        stored = {name: getattr(self, name) for name in REQUIRED_ITEM_FIELDS}
        for name, default in ITEM_DEFAULTS.items():
            value = getattr(self, name)
            if value != default:
                stored[name] = list(value) if name == "supersedes" else value
        return stored


class ItemReader:
    """``Item.from_dict`` that reads each stored dict once per position: a run's item lists share the
    dicts of the items a call carries over from the one before (``ingest.compact.decode``), mostly at
    the same positions, so re-analysing a run that resends its history reads each item once, not once
    per call. Items are frozen: one is safely shared by several calls' inputs."""

    def __init__(self) -> None:
        # (id of the dict, position) -> (the dict, its item); keeping the dict keeps its id from being
        # reused by another dict while this reader lives, so the id alone names it.
        self._read: dict[tuple[int, int], tuple[Mapping[str, Any], Item]] = {}

    def __call__(self, data: Mapping[str, Any], position: int) -> Item:
        key = (id(data), position)
        if key not in self._read:
            self._read[key] = (data, Item.from_dict(data, position))
        return self._read[key][1]


def expand(stored: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Stored items as dicts with every field present and their position in the window."""
    return [
        {
            "id": item["id"],
            "kind": item["kind"],
            "bucket": item["bucket"],
            "position": position,
            **{key: item.get(key, default) for key, default in ITEM_DEFAULTS.items()},
            "supersedes": list(item.get("supersedes") or ()),
            "hash": item["hash"],
        }
        for position, item in enumerate(stored)
    ]


@dataclass(frozen=True)
class Excluded:
    """A candidate the context builder left out, and why."""

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


# No call has this many tokens: a larger figure is junk, and summing a few of them into a run's totals
# would overflow its 64-bit columns (failing every later batch of the run).
MAX_TOKENS = 2**40


def count_of(value: Any) -> int | None:
    """A count (tokens, milliseconds) as telemetry sends it: an int, a whole float or ASCII digits, from 0
    to ``MAX_TOKENS``; anything else (a bool, a fraction, "²", junk) is None: unknown, never zero."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str):
        value = value.strip()
        # isdigit() alone accepts "²", which int() refuses.
        value = int(value) if value.isascii() and value.isdigit() and len(value) <= 13 else None
    if isinstance(value, int) and 0 <= value <= MAX_TOKENS:
        return value
    return None


USAGE_FIGURES = ("uncached", "cache_write", "cache_read", "output", "reasoning", "prompt_total")


@dataclass(frozen=True)
class Usage:
    """A call's usage, normalised: a figure the source did not report is None (unknown), never 0.

    ``prompt_total = uncached + cache_write + cache_read``. ``raw`` keeps the attributes it was read from
    and ``notes`` what normalising them had to decide."""

    uncached: int | None = None
    cache_write: int | None = None
    cache_read: int | None = None
    output: int | None = None
    reasoning: int | None = None
    prompt_total: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> "Usage":
        """The usage split as stored; a figure that is missing stays unknown (None)."""
        data = data or {}
        return cls(**{name: data.get(name) for name in USAGE_FIGURES})

    def to_dict(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in USAGE_FIGURES}


def position_shares(tokens: Sequence[int | None]) -> list[tuple[float, float]]:
    """Per item, where it starts and where its centre sits in the window, as shares of the whole.

    By tokens when every item's count is known (and the total is not 0), else by position in the list."""
    count = len(tokens)
    total = sum(value or 0 for value in tokens)
    by_tokens = total > 0 and all(value is not None for value in tokens)
    shares, offset = [], 0
    for index, value in enumerate(tokens):
        size = value or 0
        if by_tokens:
            shares.append((offset / total, (offset + size / 2) / total))
        else:
            shares.append((index / count, (index + 0.5) / count))
        offset += size
    return shares


def in_middle(share: float) -> bool:
    """Whether a position share lies in the middle of the window."""
    return MIDDLE[0] <= share <= MIDDLE[1]
