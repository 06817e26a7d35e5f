"""Masking secrets in trace content before anything is stored. No Django here.

Patterns are applied to every string a decoded OTLP request carries (names, keys and values at every
depth, text in bytes values, log bodies; see ``mask_request``) at the receiver, before the raw batch is
written: a masked secret never reaches the database.

Every pattern runs on RE2 (google-re2), whose searches take time linear in the text: a project's own
pattern such as ``(a+)+$`` cannot stall a web process. One search is linear, but finding every match
is not always (a pattern like ``a*c|a`` rescans the rest of the text for each match: quadratic, see
golang/go#11181), so masking a request also has a time budget linear in its size; past it the
remaining strings are masked whole rather than stored unmasked.
"""

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import re2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# What ``mask`` puts in place of what it removed.
_MASK = re.compile(r"\[REDACTED:[^\[\]]*\]")


def only_masks(text: str) -> bool:
    """Whether nothing of ``text`` is left but masks (and whitespace)."""
    return bool(text.strip()) and not _MASK.sub("", text).strip()


# Default patterns, by name. Names appear in the mask, so a reader knows what was removed.
DEFAULT_PATTERNS = (
    ("api_key", r"\b(?:sk|rk|pk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
    ("aws_access_key", r"\bAKIA[0-9A-Z]{16}\b"),
    ("github_token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    ("slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("bearer_token", r"\b(?i:bearer)\s+[A-Za-z0-9._~+/=-]{20,}"),
    # RE2's leftmost match starts where a run of local-part characters starts: no \b or look-behind
    # (which RE2, and the settings page's help, do not have) is needed to mask the whole address.
    ("email", r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"),
)
# Patterns that projects created with an older default still hold, each read in its RE2 form.
_OLD_EMAIL = r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"
_LOOKBEHIND_EMAIL = r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b"
# The RE2 form of a default pattern, where it is not the same text. RE2's \s is ASCII; the bearer
# pattern keeps Python's whitespace (str.isspace) so it misses nothing it found.
_PY_SPACE = r"[\t-\r\x1c-\x20\x85\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
_RE2_FORM = {
    DEFAULT_PATTERNS[4][1]: DEFAULT_PATTERNS[4][1].replace(r"\s", _PY_SPACE),
    _LOOKBEHIND_EMAIL: DEFAULT_PATTERNS[5][1],
    _OLD_EMAIL: DEFAULT_PATTERNS[5][1],
}
# A cheap necessary condition for each default pattern, on raw bytes: a search that starts with a
# literal, or a plain substring test: ~8 ms on a 2 MB batch, where the mask pass takes ~10 times that.
_SCREENS = {
    DEFAULT_PATTERNS[0][1]: re.compile(rb"k-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16}").search,
    DEFAULT_PATTERNS[1][1]: re.compile(rb"AKIA[0-9A-Z]{16}").search,
    DEFAULT_PATTERNS[2][1]: re.compile(rb"gh[pousr]_[A-Za-z0-9]{30}").search,
    DEFAULT_PATTERNS[3][1]: re.compile(rb"xox[abprs]-[A-Za-z0-9-]{10}").search,
    DEFAULT_PATTERNS[4][1]: lambda data: b"bearer" in data.lower(),
    DEFAULT_PATTERNS[5][1]: re.compile(rb"@[A-Za-z0-9.-]+\.[A-Za-z]{2}").search,
}
_SCREENS[_OLD_EMAIL] = _SCREENS[_LOOKBEHIND_EMAIL] = _SCREENS[DEFAULT_PATTERNS[5][1]]

# Limits on a project's own pattern. A pattern can defeat RE2's DFA (its states explode), and RE2 then
# simulates the program: still linear, but ~18 us per byte for a program of 900 instructions. One
# search cannot be interrupted, so a long string is searched in windows of WINDOW characters (plus
# OVERLAP, for matches across a cut), and the budget is checked between them: a bounded program in a
# bounded window bounds the time of each step.
MAX_PATTERN_LENGTH = 500
MAX_PROGRAM_SIZE = 4000
# Memory one compiled pattern may take, program and DFA cache (RE2's default, stated): past it RE2
# refuses the pattern, or searches without the DFA (slower, still linear).
MAX_MEM = 8 << 20
WINDOW = 8192
OVERLAP = 1024
# The time masking one request may take: a fixed part plus a part per byte. A legitimate batch takes
# ~0.05 s per MB on one core (bench: 2 MB, 512 chat spans, 86 ms); the budget leaves 20 times that.
BUDGET_SECONDS = 0.5
BUDGET_SECONDS_PER_MB = 1.0
# The names in the mask of a string masked whole because it could not be searched.
TIME_LIMIT = "time_limit"
UNSEARCHABLE = "unsearchable"


def _maybe(data: bytes) -> bool:
    return True


def _options() -> "re2.Options":
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    # Leftmost-longest: where a pattern could match empty (r"\b(x)?"), a longer match at the same place
    # still wins, so no pattern can hide another's match (RE2's iteration skips a character after an
    # empty match). It also masks the most a match can cover.
    options.longest_match = True
    return options


class PatternError(ValueError):
    pass


class _OverBudget(Exception):
    pass


class Budget:
    """A deadline for masking one request; ``exceeded`` tells whether strings were masked whole for it."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.exceeded = False

    @classmethod
    def for_size(cls, size: int) -> "Budget":
        return cls(BUDGET_SECONDS + BUDGET_SECONDS_PER_MB * size / 1_000_000)

    def check(self) -> None:
        if self.exceeded or time.monotonic() > self.deadline:
            self.exceeded = True
            raise _OverBudget


def _re2_error(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)


def compile_own(pattern: str, label: str, case_sensitive: bool = True) -> "re2._Regexp":
    """A person's pattern compiled by RE2 within MAX_MEM and MAX_PROGRAM_SIZE, or PatternError naming
    ``label`` and why. Not through ``re2.compile``: that keeps the process's last 128 patterns in an LRU
    cache (up to MAX_MEM each), where a pattern must live only as long as its caller holds it."""
    options = _options()
    options.case_sensitive = case_sensitive
    options.max_mem = MAX_MEM
    try:
        compiled = re2._Regexp(pattern, options)
    except re2.error as exc:
        raise PatternError(
            f"{label}: {_re2_error(exc)} (patterns use RE2 syntax, which runs in linear time: "
            "no look-around and no back-references)"
        ) from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise PatternError(
            f"{label}: too complex (RE2 program of {compiled.programsize} > {MAX_PROGRAM_SIZE} instructions)"
        )
    return compiled


def _check_own_pattern(name: str, pattern: str) -> None:
    """A project's own pattern (not a default): RE2 must take it, small, and not matching nothing."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"pattern {name} is longer than {MAX_PATTERN_LENGTH} characters")
    compiled = compile_own(pattern, f"pattern {name}")
    if compiled.fullmatch("") is not None:
        raise PatternError(f"pattern {name} matches the empty string, so it would mask nothing")


@dataclass(frozen=True)
class Redactor:
    """Named patterns compiled into one RE2 expression; ``mask`` replaces each match by ``[REDACTED:name]``.

    ``unusable`` names stored patterns that cannot run (saved before ctxview used RE2, e.g. with a
    look-behind): while there is one, every string is masked whole, so nothing goes through unmasked."""

    names: tuple[str, ...]
    combined: "re2._Regexp | None"
    screens: tuple[Callable[[bytes], object], ...] = ()
    groups: tuple[tuple[int, str], ...] = ()  # (group index, pattern name) of each pattern
    unusable: tuple[tuple[str, str], ...] = ()  # (pattern name, why it cannot run)

    @classmethod
    def from_patterns(cls, patterns: Iterable[tuple[str, str]]) -> "Redactor":
        """The redactor of patterns being saved: PatternError with a message for any that cannot run."""
        patterns = list(patterns)
        for name, pattern in patterns:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", name):
                raise PatternError(f"pattern name {name!r}: use lower-case letters, digits and _")
            if pattern not in _SCREENS:
                _check_own_pattern(name, pattern)
        if not patterns:
            return cls((), None)
        names = tuple(name for name, _ in patterns)
        text = "|".join(f"(?P<{name}>{_RE2_FORM.get(pattern, pattern)})" for name, pattern in patterns)
        try:
            combined = re2._Regexp(text, _options())  # not re2.compile: no process-wide cache
        except re2.error as exc:  # e.g. two patterns with one name
            raise PatternError(f"the patterns do not combine: {_re2_error(exc)}") from None
        # A project's own pattern cannot be screened on bytes: ^, $ and \b see the protobuf bytes
        # around a string, not its ends, so a search of the whole request could miss a match.
        screens = tuple(_SCREENS.get(pattern, _maybe) for _, pattern in patterns)
        groups = tuple((combined.groupindex[name], name) for name in names)
        return cls(names, combined, screens, groups)

    @classmethod
    def from_stored(cls, patterns: Iterable[tuple[str, str]]) -> "Redactor":
        """The redactor of a project's stored patterns; never raises. See ``unusable``."""
        patterns = list(patterns)
        try:
            return cls.from_patterns(patterns)
        except PatternError:
            pass
        unusable = []
        for name, pattern in patterns:
            try:
                cls.from_patterns([(name, pattern)])
            except PatternError as exc:
                unusable.append((name, str(exc)))
        if not unusable:  # each pattern works alone, not together
            unusable.append((patterns[0][0], "the patterns do not combine"))
        names = tuple(name for name, _ in patterns)
        return cls(names, None, (_maybe,), (), tuple(unusable))

    def might_match(self, data: bytes) -> bool:
        """A quick test on the raw protobuf bytes (strings are embedded in them as UTF-8).

        False means no string in them can match; True means one may (the screens are weaker than the
        patterns, so a batch with an "@" in a binary span id gets the full mask pass, rightly)."""
        return any(screen(data) for screen in self.screens)

    def spans(self, text: str, budget: Budget | None = None) -> list[tuple[int, int, str]]:
        """(start, end, pattern name) of each match; _OverBudget when the budget runs out meanwhile.

        A text longer than a window is searched window by window; a match that reaches the end of its
        window may go on past it, so it is taken to the end of the text (masking more, never less)."""
        if self.combined is None:
            return []
        if len(text) <= WINDOW + OVERLAP:
            return self._search(text, 0, budget)
        found: list[tuple[int, int, str]] = []
        for offset in range(0, len(text), WINDOW):
            end = min(len(text), offset + WINDOW + OVERLAP)
            for start, stop, name in self._search(text[offset:end], offset, budget):
                found.append((start, len(text) if stop == end else stop, name))
            if found and found[-1][1] == len(text):
                break
        # Windows overlap: merge what they found into disjoint spans, in order.
        merged: list[tuple[int, int, str]] = []
        for start, stop, name in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(stop, merged[-1][1]), merged[-1][2])
            else:
                merged.append((start, stop, name))
        return merged

    def _search(self, text: str, offset: int, budget: Budget | None) -> list[tuple[int, int, str]]:
        found = []
        if budget is not None:
            budget.check()
        # Each step of finditer is one linear search; the budget bounds how many there are.
        for match in self.combined.finditer(text):
            start, end = match.span()
            if start < end:  # an empty match (e.g. of "\b") has nothing to mask
                name = next(name for index, name in self.groups if match.start(index) >= 0)
                found.append((offset + start, offset + end, name))
            if budget is not None:
                budget.check()
        return found

    def mask(self, text: str, budget: Budget | None = None) -> str:
        if not text:
            return text
        if self.unusable:
            return f"[REDACTED:{self.unusable[0][0]}]"
        try:
            found = self.spans(text, budget)
        except _OverBudget:
            return f"[REDACTED:{TIME_LIMIT}]"
        except UnicodeEncodeError:  # a lone surrogate (from JSON escapes): RE2 reads UTF-8 only
            return f"[REDACTED:{UNSEARCHABLE}]"
        if not found:
            return text
        pieces, position = [], 0
        for start, end, name in found:
            pieces += [text[position:start], f"[REDACTED:{name}]"]
            position = end
        pieces.append(text[position:])
        return "".join(pieces)

    def mask_bytes(self, data: bytes, budget: Budget | None = None) -> bytes:
        """Bytes with the text in them masked: all of it when it is UTF-8, else each UTF-8 run."""
        if not data:
            return data
        try:
            return self.mask(data.decode("utf-8"), budget).encode("utf-8")
        except UnicodeDecodeError:
            pass
        # Undecodable bytes become lone surrogates (and back): mask the text between them.
        text = data.decode("utf-8", "surrogateescape")
        masked = _BINARY.sub(lambda run: self.mask(run.group(), budget), text)
        return masked.encode("utf-8", "surrogateescape")


_BINARY = re.compile("[^\udc80-\udcff]+")  # a run of decoded text between undecodable bytes


# --- Walking a request ---------------------------------------------------------------------------
# Every string field of every message, found through the descriptors rather than listed by hand, so
# a field the OTLP schema adds later (as it added entity_refs to Resource) is masked too.
_STRING = FieldDescriptor.TYPE_STRING
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_BYTES_VALUE = AnyValue.DESCRIPTOR.fields_by_name["bytes_value"]  # other bytes fields are ids


def _mask_message(message: Message, redactor: Redactor, budget: Budget | None) -> int:
    changed = 0
    for field, value in message.ListFields():
        if field.type == _MESSAGE:
            for item in value if field.is_repeated else (value,):
                changed += _mask_message(item, redactor, budget)
        elif field.type == _STRING:
            if field.is_repeated:
                for index, text in enumerate(value):
                    masked = redactor.mask(text, budget)
                    if masked != text:
                        value[index], changed = masked, changed + 1
            else:
                masked = redactor.mask(value, budget)
                if masked != value:
                    setattr(message, field.name, masked)
                    changed += 1
        elif field is _BYTES_VALUE:
            masked_bytes = redactor.mask_bytes(value, budget)
            if masked_bytes != value:
                message.bytes_value, changed = masked_bytes, changed + 1
    return changed


def mask_request(message: Message, redactor: Redactor, budget: Budget | None = None) -> int:
    """Mask every string of a traces or logs export request in place; returns how many changed.

    That is every name, key and string value at any depth (resources, scopes, spans, events, links,
    statuses, log records and their bodies) and the text in bytes values; unknown fields are dropped."""
    if redactor.combined is None and not redactor.unusable:
        return 0
    # Fields this protobuf schema does not know would be stored as sent, unsearched: drop them (ctxview
    # reads none of them). Dropping any counts as a change, so the request is stored re-encoded.
    size = message.ByteSize()
    message.DiscardUnknownFields()
    dropped = int(message.ByteSize() != size)
    return _mask_message(message, redactor, budget) + dropped
