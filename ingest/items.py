"""An item of a call's context window, and the content hash everyone agrees on. No Django here."""

import hashlib
import json
from dataclasses import dataclass
from typing import Any

# Content kept per item; the hash and the token estimate always cover the whole of it.
CONTENT_LIMIT = 262_144


def digest(text: str) -> str:
    """The content hash used everywhere: the first 32 hex characters of SHA-256 of the UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def render(value: Any) -> str:
    """Text of structured content, keeping the sender's key order (a reordering changes the hash)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Item:
    id: str
    kind: str
    bucket: str
    role: str | None
    position: int
    tokens: int | None
    hash: str
    tokens_estimated: bool = True
    mode: str = "verbatim"
    version: str | None = None
    source: str | None = None
    trust: str | None = None
    supersedes: tuple[str, ...] = ()
    pinned: bool = False
    origin_turn: int | None = None
    cache_breakpoint: bool = False
    content: str | None = None  # bounded to CONTENT_LIMIT; not part of to_dict()
    content_truncated: bool = False

    def to_dict(self) -> dict:
        """The stored form: fields at their default are left out (a long run stores many items)."""
        full = {
            "id": self.id,
            "kind": self.kind,
            "bucket": self.bucket,
            "role": self.role,
            "tokens": self.tokens,
            "tokens_estimated": self.tokens_estimated,
            "hash": self.hash,
            "mode": self.mode,
            "version": self.version,
            "source": self.source,
            "trust": self.trust,
            "supersedes": list(self.supersedes),
            "pinned": self.pinned,
            "origin_turn": self.origin_turn,
            "cache_breakpoint": self.cache_breakpoint,
        }
        return {key: value for key, value in full.items() if key in REQUIRED or value != ITEM_DEFAULTS[key]}


REQUIRED = frozenset({"id", "kind", "bucket", "hash"})
ITEM_DEFAULTS = {
    "role": None,
    "tokens": None,
    "tokens_estimated": True,
    "mode": "verbatim",
    "version": None,
    "source": None,
    "trust": None,
    "supersedes": [],
    "pinned": False,
    "origin_turn": None,
    "cache_breakpoint": False,
}


def expand(stored: list[dict]) -> list[dict]:
    """Stored items with every field present and their position in the window."""
    return [
        {
            "id": item["id"],
            "kind": item["kind"],
            "bucket": item["bucket"],
            "position": position,
            **{key: item.get(key, default) for key, default in ITEM_DEFAULTS.items()},
            "hash": item["hash"],
        }
        for position, item in enumerate(stored)
    ]
