"""The explicit ``ctxview.manifest`` of a call (schema: schemas/manifest-v1.schema.json). No Django here.

A bad manifest is reported on its call, never a reason to drop the span: ``parse`` raises
ManifestError with one sentence that names the offending field.
"""

from dataclasses import dataclass
from typing import Any

from ctxcore.vocabulary import BUCKETS, MODES, ROLES, TRUST_LEVELS, Item, digest
from ingest import storable, tokens

MAX_ITEMS = 5000
MAX_TEXT = 500
MAX_CONTENT = 262_144


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Manifest:
    items: tuple[Item, ...]
    excluded: tuple[dict, ...]
    budget: dict | None
    prompt_version: str
    warnings: tuple[str, ...]


def _text(value: Any, where: str, required: bool = False, limit: int = MAX_TEXT) -> str | None:
    if value is None:
        if required:
            raise ManifestError(f"{where} is required")
        return None
    if not isinstance(value, str) or (required and not value):
        raise ManifestError(
            f"{where} must be a non-empty string" if required else f"{where} must be a string"
        )
    if len(value) > limit:
        raise ManifestError(f"{where} is longer than {limit} characters")
    return storable.storable_text(value)


MAX_COUNT = 2**31 - 1  # token and turn columns are 32-bit


def _count(value: Any, where: str, minimum: int = 0) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ManifestError(f"{where} must be a whole number of at least {minimum}")
    if value > MAX_COUNT:
        raise ManifestError(f"{where} is larger than {MAX_COUNT}")
    return value


def _choice(value: Any, where: str, choices: tuple[str, ...], default: str | None = None) -> str | None:
    if value is None:
        return default
    if value not in choices:
        raise ManifestError(f"{where}: {value!r} is not one of {', '.join(choices)}")
    return value


def _flag(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ManifestError(f"{where} must be true or false")
    return value


def parse(value: Any) -> Manifest:
    """The manifest in a span attribute (a JSON string or a structured value), validated."""
    if isinstance(value, str):
        try:
            value = storable.json_value(value)
        except ValueError as exc:
            raise ManifestError(f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ManifestError("must be a JSON object")
    schema = value.get("schema")
    if not isinstance(schema, str) or not schema.startswith("ctxview.manifest/1"):
        raise ManifestError(f"schema {schema!r} is not supported (expected 'ctxview.manifest/1')")
    raw_items = value.get("items", [])
    if not isinstance(raw_items, list):
        raise ManifestError("items must be a list")
    if len(raw_items) > MAX_ITEMS:
        raise ManifestError(f"items has {len(raw_items)} entries; at most {MAX_ITEMS} are accepted")

    warnings: list[str] = []
    items = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_items):
        where = f"items[{index}]"
        if not isinstance(raw, dict):
            raise ManifestError(f"{where} must be an object")
        item_id = _text(raw.get("id"), f"{where}.id", required=True)
        if item_id in seen:
            raise ManifestError(f"{where}.id {item_id!r} appears twice")
        seen.add(item_id)
        content = _text(raw.get("content"), f"{where}.content", limit=MAX_CONTENT)
        content_hash = _text(raw.get("hash"), f"{where}.hash", required=True, limit=128)
        truncated = _flag(raw.get("content_truncated"), f"{where}.content_truncated")
        if content is not None and not truncated and digest(content) != content_hash.lower():
            warnings.append(f"{where} ({item_id}): content does not match its hash")
        supersedes = raw.get("supersedes") or []
        if not isinstance(supersedes, list) or not all(isinstance(entry, str) for entry in supersedes):
            raise ManifestError(f"{where}.supersedes must be a list of item ids")
        token_count = _count(raw.get("tokens"), f"{where}.tokens")
        # The sender's own figure is a measurement unless it says it estimated it (the SDK does).
        estimated = _flag(raw.get("tokens_estimated"), f"{where}.tokens_estimated")
        if token_count is None and content is not None:
            token_count, estimated = tokens.count(content), True
        items.append(
            Item(
                id=item_id,
                kind=_text(raw.get("kind"), f"{where}.kind", required=True, limit=100),
                bucket=_choice(raw.get("bucket"), f"{where}.bucket", BUCKETS) or "other",
                role=_choice(raw.get("role"), f"{where}.role", ROLES),
                position=index,
                tokens=token_count,
                tokens_estimated=estimated,
                hash=content_hash.lower(),
                mode=_choice(raw.get("mode"), f"{where}.mode", MODES, default="verbatim"),
                version=_text(raw.get("version"), f"{where}.version"),
                source=_text(raw.get("source"), f"{where}.source", limit=2000),
                trust=_choice(raw.get("trust"), f"{where}.trust", TRUST_LEVELS),
                supersedes=tuple(supersedes),
                pinned=_flag(raw.get("pinned"), f"{where}.pinned"),
                origin_turn=_count(raw.get("origin_turn"), f"{where}.origin_turn", minimum=1),
                cache_breakpoint=_flag(raw.get("cache_breakpoint"), f"{where}.cache_breakpoint"),
                content=content,
                content_truncated=truncated,
            )
        )

    raw_excluded = value.get("excluded", [])
    if not isinstance(raw_excluded, list) or len(raw_excluded) > MAX_ITEMS:
        raise ManifestError(f"excluded must be a list of at most {MAX_ITEMS} entries")
    excluded = []
    for index, raw in enumerate(raw_excluded):
        where = f"excluded[{index}]"
        if not isinstance(raw, dict):
            raise ManifestError(f"{where} must be an object")
        excluded.append(
            {
                "id": _text(raw.get("id"), f"{where}.id", required=True),
                "reason": _text(raw.get("reason"), f"{where}.reason", required=True, limit=100),
                "tokens": _count(raw.get("tokens"), f"{where}.tokens"),
                "kind": _text(raw.get("kind"), f"{where}.kind", limit=100),
                "source": _text(raw.get("source"), f"{where}.source", limit=2000),
                "version": _text(raw.get("version"), f"{where}.version"),
            }
        )

    budget = value.get("budget")
    if budget is not None:
        if not isinstance(budget, dict):
            raise ManifestError("budget must be an object")
        budget = {
            key: _count(budget.get(key), f"budget.{key}") for key in ("limit", "input", "reserved_output")
        }
    prompt_version = _text(value.get("prompt_version"), "prompt_version") or ""
    return Manifest(tuple(items), tuple(excluded), budget, prompt_version, tuple(warnings))
