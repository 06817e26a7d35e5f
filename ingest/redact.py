"""Masking secrets in trace content before anything is stored. No Django here.

Patterns are applied to every string value of a decoded OTLP request (attributes, events, links, log
bodies) at the receiver, before the raw batch is written: a masked secret never reaches the database.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# Default patterns, by name. Names appear in the mask, so a reader knows what was removed.
DEFAULT_PATTERNS = (
    ("api_key", r"\b(?:sk|rk|pk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    ("aws_access_key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    ("slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("bearer_token", r"\b(?i:bearer)\s+[A-Za-z0-9._~+/=-]{20,}"),
    # The local part starts where a run of its characters starts, not at any \b inside one: otherwise a
    # long run with no "@" ("a.a.a.a…") is scanned again from every dot, in time quadratic in its length.
    ("email", r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"),
)
# A cheap necessary condition for each default pattern, on raw bytes: a search that starts with a
# literal (re finds those fast), or a plain substring test. The patterns themselves start with \b or a
# look-behind, which makes re try every position of a batch: ~30x slower on a 2 MB batch.
_SCREENS = {
    DEFAULT_PATTERNS[0][1]: re.compile(rb"k-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16}").search,
    DEFAULT_PATTERNS[1][1]: re.compile(rb"AKIA[0-9A-Z]{16}").search,
    DEFAULT_PATTERNS[2][1]: re.compile(rb"gh[pousr]_[A-Za-z0-9]{30}").search,
    DEFAULT_PATTERNS[3][1]: re.compile(rb"xox[abprs]-[A-Za-z0-9-]{10}").search,
    DEFAULT_PATTERNS[4][1]: lambda data: b"bearer" in data.lower(),
    DEFAULT_PATTERNS[5][1]: re.compile(rb"@[A-Za-z0-9.-]+\.[A-Za-z]{2}").search,
}


def _maybe(data: bytes) -> bool:
    return True


# Patterns that projects created with an older default still hold, and what replaces them.
_UPGRADED = {
    r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b": DEFAULT_PATTERNS[-1][1],
}


class PatternError(ValueError):
    pass


@dataclass(frozen=True)
class Redactor:
    """Named patterns compiled into one expression; ``mask`` replaces each match by ``[REDACTED:name]``."""

    names: tuple[str, ...]
    combined: re.Pattern | None
    screens: tuple[Callable[[bytes], object], ...] = ()

    @classmethod
    def from_patterns(cls, patterns: Iterable[tuple[str, str]]) -> "Redactor":
        patterns = [(name, _UPGRADED.get(pattern, pattern)) for name, pattern in patterns]
        names = tuple(name for name, _ in patterns)
        for name, pattern in patterns:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", name):
                raise PatternError(f"pattern name {name!r}: use lower-case letters, digits and _")
            try:
                re.compile(pattern)
            except re.error as exc:
                raise PatternError(f"pattern {name}: {exc}") from None
        if not patterns:
            return cls((), None)
        text = "|".join(f"(?P<{name}>{pattern})" for name, pattern in patterns)
        # Another pattern than a default one cannot be screened on bytes: in bytes mode \w, \b, \s and
        # case-insensitivity are ASCII-only, so a search could miss what the pattern finds in the text.
        screens = tuple(_SCREENS.get(pattern, _maybe) for _, pattern in patterns)
        try:
            return cls(names, re.compile(text), screens)
        except re.error as exc:  # e.g. a global flag such as (?i) inside one pattern: use (?i:...)
            raise PatternError(f"the patterns do not combine: {exc}") from None

    def might_match(self, data: bytes) -> bool:
        """A quick test on the raw protobuf bytes (strings are embedded in them as UTF-8).

        False means no string in them can match; True means one may (the screens are weaker than the
        patterns, so a batch with an "@" in a binary span id gets the full mask pass, rightly)."""
        return any(screen(data) for screen in self.screens)

    def mask(self, text: str) -> str:
        if self.combined is None:
            return text
        return self.combined.sub(lambda match: f"[REDACTED:{match.lastgroup}]", text)


def _mask_value(value: AnyValue, redactor: Redactor) -> int:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        masked = redactor.mask(value.string_value)
        if masked != value.string_value:
            value.string_value = masked
            return 1
        return 0
    if kind == "array_value":
        return sum(_mask_value(item, redactor) for item in value.array_value.values)
    if kind == "kvlist_value":
        return sum(_mask_value(entry.value, redactor) for entry in value.kvlist_value.values)
    return 0


def _mask_attributes(key_values, redactor: Redactor) -> int:
    return sum(_mask_value(entry.value, redactor) for entry in key_values)


def mask_request(message: Message, redactor: Redactor) -> int:
    """Mask every string of a traces or logs export request in place; returns how many changed."""
    changed = 0
    for resource_spans in getattr(message, "resource_spans", ()):
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                changed += _mask_attributes(span.attributes, redactor)
                for event in span.events:
                    changed += _mask_attributes(event.attributes, redactor)
                for link in span.links:
                    changed += _mask_attributes(link.attributes, redactor)
                masked = redactor.mask(span.status.message)
                if masked != span.status.message:
                    span.status.message, changed = masked, changed + 1
    for resource_logs in getattr(message, "resource_logs", ()):
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                changed += _mask_attributes(record.attributes, redactor)
                if record.HasField("body"):
                    changed += _mask_value(record.body, redactor)
    return changed
