"""The manifest convention in code: item and excluded-item records, their validation, hashes and ids.

Pure Python, no OpenTelemetry: the ingest side and the tests can import it on its own. The words
(buckets, modes, kinds, reasons) are ctxview's shared vocabulary, ``ctxcore.vocabulary``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ctxcore import vocabulary
from ctxcore.vocabulary import BUCKETS, EXCLUSION_REASONS, MODES, ROLES, TRUST_LEVELS

SCHEMA = "ctxview.manifest/1"

# The shared vocabulary, as the sender's convention names it.
TRUSTS = TRUST_LEVELS
REASONS = tuple(EXCLUSION_REASONS)

# Bounds, mirrored in schemas/manifest-v1.schema.json (and within what ctxview's ingest accepts).
MAX_ITEMS = 5000
MAX_EXCLUDED = 5000
MAX_ID = 500
MAX_WORD = 64  # kind, reason
MAX_TEXT = 500  # version, prompt_version
MAX_SOURCE = 2000  # paths and URLs run longer
MAX_SUPERSEDES = 100
MAX_CONTENT = 65536
HASH_LENGTH = 32
_HASH = re.compile(f"[0-9a-f]{{{HASH_LENGTH}}}")


# The render and the hash are the vocabulary's, so the SDK and the server hash the same bytes the same way
# (a lone surrogate included). No sort_keys on purpose: a schema re-serialised with another key order is
# different bytes to the provider (a prompt-cache break), so it must hash differently here too.
render = vocabulary.render
content_hash = vocabulary.digest


def message_id(role: str, rendered: str) -> str:
    """The stable id of a message: the vocabulary's rule over its role and rendered content."""
    return vocabulary.message_id(vocabulary.digest(role + rendered))


@dataclass(frozen=True)
class Item(vocabulary.Item):
    """One piece of the context window, as it appears in ``manifest.items``: the vocabulary's item (its
    fields are declared there once), checked as it is made. Its place in the list is its position, so
    ``position`` is not written; a sender states its token counts, so they are not estimates unless
    it says so."""

    position: int = 0
    tokens_estimated: bool = False

    def __post_init__(self) -> None:
        _check_id(self.id, "id")
        _check_word(self.kind, "kind")
        _check_choice(self.bucket, BUCKETS, "bucket")
        _check_choice(self.role, ROLES, "role", optional=True)
        _check_choice(self.mode, MODES, "mode")
        _check_choice(self.trust, TRUSTS, "trust", optional=True)
        if not (isinstance(self.hash, str) and _HASH.fullmatch(self.hash)):
            raise ValueError(f"hash must be {HASH_LENGTH} lowercase hex characters, got {self.hash!r}")
        _check_count(self.tokens, "tokens", minimum=0)
        _check_count(self.origin_turn, "origin_turn", minimum=1)
        _check_text(self.version, "version")
        _check_text(self.source, "source", MAX_SOURCE)
        if not isinstance(self.supersedes, tuple) or len(self.supersedes) > MAX_SUPERSEDES:
            raise ValueError(f"supersedes must be a tuple of at most {MAX_SUPERSEDES} ids")
        for other in self.supersedes:
            _check_id(other, "supersedes")
        if self.content is not None and not (
            isinstance(self.content, str) and len(self.content) <= MAX_CONTENT
        ):
            raise ValueError(f"content must be a string of at most {MAX_CONTENT} characters")

    def to_dict(self) -> dict[str, Any]:
        """The item as a manifest JSON object (every field written, unknowns as null)."""
        # Not dataclasses.asdict: its deep copy is most of the SDK's time on a big manifest.
        data = {name: getattr(self, name) for name in _ITEM_FIELDS}
        data["supersedes"] = list(self.supersedes)
        return data


@dataclass(frozen=True)
class Excluded(vocabulary.Excluded):
    """A candidate the context builder left out of this call, with its reason (the shared shape,
    checked as it is made)."""

    def __post_init__(self) -> None:
        _check_id(self.id, "id")
        _check_word(self.reason, "reason")
        _check_count(self.tokens, "tokens", minimum=0)
        if self.kind is not None:
            _check_word(self.kind, "kind")
        _check_text(self.source, "source", MAX_SOURCE)
        _check_text(self.version, "version")

    def to_dict(self) -> dict[str, Any]:
        """The excluded item as a manifest JSON object."""
        return {name: getattr(self, name) for name in _EXCLUDED_FIELDS}


_ITEM_FIELDS = tuple(entry.name for entry in fields(Item) if entry.name != "position")
_EXCLUDED_FIELDS = tuple(entry.name for entry in fields(Excluded))


@dataclass
class Budget:
    """The call's token budget: window ``limit``, ``input`` counted by the builder, ``reserved_output``."""

    limit: int | None = None
    input: int | None = None
    reserved_output: int | None = None

    def update(self, limit: int | None, input: int | None, reserved_output: int | None) -> None:
        """Set the figures given; leave the others as they are."""
        for name, value in (("limit", limit), ("input", input), ("reserved_output", reserved_output)):
            if value is not None:
                _check_count(value, name, minimum=0)
                setattr(self, name, value)


@dataclass
class Manifest:
    """Everything ``ctxview.manifest`` carries for one call."""

    prompt_version: str | None = None
    budget: Budget = field(default_factory=Budget)
    items: list[Item] = field(default_factory=list)
    excluded: list[Excluded] = field(default_factory=list)

    def to_dict(self, with_content: bool = True) -> dict[str, Any]:
        """The manifest as a JSON-ready dict; ``with_content=False`` drops contents (marked truncated)."""
        items = [item.to_dict() for item in self.items]
        if not with_content:
            for item in items:
                if item["content"] is not None:
                    item["content"], item["content_truncated"] = None, True
        return {
            "schema": SCHEMA,
            "prompt_version": self.prompt_version,
            "budget": asdict(self.budget),
            "items": items,
            "excluded": [entry.to_dict() for entry in self.excluded],
        }


def dumps(data: Mapping[str, Any]) -> str:
    """Compact JSON, as written into the ``ctxview.manifest`` attribute."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def clip(text: str | None, limit: int = MAX_TEXT) -> str | None:
    """Cut free text (version, prompt_version; source with MAX_SOURCE) to its bound, not failing the agent."""
    return text if text is None or len(text) <= limit else text[:limit]


def as_ids(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """Normalise ``supersedes``: one id, an iterable of ids, or nothing."""
    if values is None:
        return ()
    if isinstance(values, str):
        return (values,)
    return tuple(values)


def _check_id(value: Any, name: str) -> None:
    if not (isinstance(value, str) and 0 < len(value) <= MAX_ID):
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_ID} characters, got {value!r}")


def _check_word(value: Any, name: str) -> None:
    if not (isinstance(value, str) and 0 < len(value) <= MAX_WORD):
        raise ValueError(f"{name} must be a non-empty string of at most {MAX_WORD} characters, got {value!r}")


def _check_text(value: Any, name: str, limit: int = MAX_TEXT) -> None:
    if value is not None and not (isinstance(value, str) and len(value) <= limit):
        raise ValueError(f"{name} must be a string of at most {limit} characters or None")


def _check_choice(value: Any, choices: tuple[str, ...], name: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value not in choices:
        allowed = " | ".join(choices) + (" | None" if optional else "")
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _check_count(value: Any, name: str, minimum: int) -> None:
    # bool is an int in Python; True tokens is a bug, not a count.
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
        raise ValueError(f"{name} must be an int >= {minimum} or None, got {value!r}")
