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
        return {
            "id": self.id,
            "kind": self.kind,
            "bucket": self.bucket,
            "role": self.role,
            "position": self.position,
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
