"""The run export's format, "ctxview.run-export" version 1: what a document must be to be imported.

Declared once, as a JSON Schema (schemas/run-export-v1.schema.json, served at
/api/v1/schema/run-export), checked by a maintained validator (jsonschema-rs: a 1 MB export in 5 ms,
where the pure-Python validator took 2 s). What a schema cannot state is checked here after it: calls
numbered 1..n, each span once, every item's content present, every content's hash that of its text,
notes and bookmarks naming calls of the document. ``problem`` gives the first problem as
``path: what is wrong`` (``calls[0].items[1].hash: missing``), never an exception's text. No Django here.
"""

import json
import math
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from pathlib import Path

import jsonschema_rs

from ctxcore.jsonpath import where
from ctxcore.vocabulary import CONTENT_LIMIT, digest

FORMAT = "ctxview.run-export"
VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "run-export-v1.schema.json"

_PATTERN_WORDS = {
    "^[0-9a-f]{32}$": "must be 32 lowercase hex characters (a content hash)",
    "^(https?://.*)?$": "must be an http(s) URL",
}
_TYPE_WORDS = {"integer": "an integer", "string": "a string", "object": "an object", "array": "a list"}


@cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@cache
def _validator():
    return jsonschema_rs.Draft202012Validator(schema())


def number(text: str) -> int | float:
    """A JSON number as the schema reads it: 2.0 is the integer 2 (JSON Schema's integer), so a count
    written as 2.0 is stored as 2; anything else stays a float."""
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise ValueError(f"{text[:40]} is too large a number")
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def problem(document) -> str | None:
    """The first reason ``document`` cannot be imported, or None: the envelope (so that another
    version is named as such), then the schema, then what the schema cannot state."""
    if not isinstance(document, dict):
        return "the document must be a JSON object"
    if document.get("format") != FORMAT:
        return f"format: must be {FORMAT!r}"
    version = document.get("version")
    if type(version) is not int or version != VERSION:
        return f"version: {json.dumps(version)[:40]} is not a version this ctxview reads (it reads {VERSION})"
    error = next(_validator().iter_errors(document), None)
    if error is not None:
        return _said(error, _keys_as_keys(document, error.instance_path))
    return _consistency(document)


def _keys_as_keys(document, path: Sequence[str | int]) -> list[str | int]:
    """The error's path with each step as the document has it: jsonschema-rs gives an object's key that
    reads as a number ("0") as the number, which would name a list entry (``contents[0]``)."""
    steps: list[str | int] = []
    value = document
    for step in path:
        if isinstance(value, dict):
            step = str(step)
        steps.append(step)
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            value = None
    return steps


def _said(error, path: list[str | int]) -> str:
    """One schema error in words, naming ``path`` (the error's, as the document has it); values from
    the document are not echoed."""
    kind = error.kind
    name = kind.name
    if name == "required":
        return f"{where([*path, kind.property])}: missing"
    if name == "additionalProperties":
        return f"{where([*path, kind.unexpected[0]])}: not a field of this format"
    if name == "type":
        words = [_TYPE_WORDS.get(word, word) for word in kind.types]
        return f"{where(path)}: must be {' or '.join(words)}"
    said = {
        "maxLength": lambda: f"longer than {kind.limit:,} characters",
        "minLength": lambda: "must not be empty",
        "maxItems": lambda: f"more than {kind.limit:,} entries",
        "maxProperties": lambda: f"more than {kind.limit:,} keys",
        "minimum": lambda: f"must be at least {kind.limit:,}",
        "maximum": lambda: f"must be at most {kind.limit:,}",
        "enum": lambda: "must be one of " + ", ".join(json.dumps(option) for option in kind.options),
        "const": lambda: f"must be {json.dumps(kind.expected_value)}",
        "pattern": lambda: _PATTERN_WORDS.get(kind.pattern, f"does not match {kind.pattern}"),
        "propertyNames": lambda: "a key " + _said(kind.error, path).split(": ", 1)[-1],
        "anyOf": lambda: "must be a string, a number, true, false, null or a list of them",
    }.get(name)
    return f"{where(path)}: {said() if said else 'is not valid here'}"


def _consistency(document: dict) -> str | None:
    calls: Sequence[dict] = document["calls"]
    contents: dict = document.get("contents", {})
    seen_seq: dict[int, int] = {}
    seen_span: dict[tuple[str, str], int] = {}
    for index, call in enumerate(calls):
        if (earlier := seen_seq.setdefault(call["seq"], index)) != index:
            return f"calls[{index}].seq: {call['seq']} again (calls[{earlier}] has it)"
        span = (call["trace_id"], call["span_id"])
        if (earlier := seen_span.setdefault(span, index)) != index:
            return f"calls[{index}]: the span (trace_id, span_id) of calls[{earlier}] again"
        # An empty ``contents``: the source kept hashes only. Else every captured item's text is there.
        if contents and call.get("content_captured"):
            for position, item in enumerate(call["items"]):
                if item["hash"] not in contents:
                    return f"calls[{index}].items[{position}].hash: no content with this hash in contents"
    if gap := next((seq for seq in range(1, len(calls) + 1) if seq not in seen_seq), None):
        return f"calls: must be numbered 1..{len(calls)} without gaps (no call has seq {gap})"
    for content_hash, content in contents.items():
        # A truncated text is a prefix of what its hash covers: kept as sent, marked truncated.
        if content.get("truncated"):
            if len(content["text"]) > CONTENT_LIMIT:
                return f"{where(('contents', content_hash, 'text'))}: longer than a truncated text can be"
        elif digest(content["text"]) != content_hash:
            return f"{where(('contents', content_hash))}: the hash is not that of its text"
    return _review_problem(document, seen_seq)


def _review_problem(document: dict, seqs: dict[int, int]) -> str | None:
    for index, note in enumerate(document.get("notes", [])):
        if note.get("call_seq") is not None and note["call_seq"] not in seqs:
            return f"notes[{index}].call_seq: no call {note['call_seq']} in the document"
        times = [("created_at", note["created_at"]), ("updated_at", note.get("updated_at"))]
        times += [
            (f"revisions[{number}].edited_at", revision["edited_at"])
            for number, revision in enumerate(note.get("revisions", []))
        ]
        for name, value in times:
            if value is not None and moment(value) is None:
                return f"notes[{index}].{name}: not an ISO 8601 date and time"
    for index, seq in enumerate(document.get("bookmarks", [])):
        if seq not in seqs:
            return f"bookmarks[{index}]: no call {seq} in the document"
    return None


def moment(value: str) -> datetime | None:
    """An ISO 8601 date and time with its offset (as exports write them), or None."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
