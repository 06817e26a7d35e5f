"""Query-string parameters of the pages, the panels and the JSON API, validated once: a bad one raises
``BadParameter`` with the sentence the 400 shows."""

import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta

# The jump box: "#57" or "call 57" names a call of the current run, "turn 40" a turn; anything else is a
# run key or an item id.
JUMP_CALL = re.compile(r"^(?:#|call\s*)(\d{1,9})$", re.IGNORECASE)
JUMP_TURN = re.compile(r"^turn\s*(\d{1,9})$", re.IGNORECASE)


class BadParameter(ValueError):
    """A query parameter the UI cannot use; the message is shown to the user as is."""


def int_param(
    query: Mapping[str, str],
    name: str,
    default: int | None,
    minimum: int,
    maximum: int,
    blank_is_default: bool = True,
) -> int | None:
    """A whole number from the query string, within bounds; missing gives ``default``, and so does empty
    unless ``blank_is_default`` is off (the API's: a form sends its empty fields, a client means a value)."""
    raw = query.get(name)
    value = (raw or "").strip()
    if raw is None or (not value and blank_is_default):
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadParameter(f"{name} must be a whole number, not {value[:40]!r}") from None
    if not minimum <= number <= maximum:
        raise BadParameter(f"{name} must be between {minimum} and {maximum}")
    return number


def time_param(
    query: Mapping[str, str], name: str, end_of_day: bool = False, zone_required: bool = False
) -> datetime | None:
    """A moment from the query string, in UTC, or None when missing.

    The pages' (forms send what people type): empty is none, a date alone is the start of that day (of
    the next with ``end_of_day``: ``until`` excludes its instant, so ``until=2026-11-30`` takes that
    day) and no zone is UTC. The API's (``zone_required``): an ISO 8601 date and time with its zone,
    exactly as sent (its schema's format); present but empty is refused.
    """
    raw = query.get(name)
    if raw is None:
        return None
    value = raw if zone_required else raw.strip()
    if not value and not zone_required:
        return None
    try:
        if len(value) == 10 and not zone_required:
            day = date.fromisoformat(value)
            parsed = datetime.combine(day + timedelta(days=1) if end_of_day else day, time.min)
        else:
            parsed = datetime.fromisoformat(value)
    except OverflowError:  # the day after 9999-12-31: after every run
        return datetime.max.replace(tzinfo=UTC)
    except ValueError:
        parsed = None
    if zone_required and (parsed is None or parsed.tzinfo is None):
        example = "2026-11-30T09:00:00Z"
        raise BadParameter(f"{name} must be an ISO 8601 date and time with a time zone, e.g. {example}")
    if parsed is None:
        example = "a date (2026-11-30) or a date and time (2026-11-30T09:00)"
        raise BadParameter(f"{name} must be {example}, not {value[:40]!r}")
    try:
        # In UTC: PostgreSQL refuses UTC offsets beyond 15:59, which ISO 8601 allows.
        return parsed.replace(tzinfo=parsed.tzinfo or UTC).astimezone(UTC)
    except OverflowError:  # year 1 or 9999 pushed past Python's range by its offset: the range's end
        return datetime.min.replace(tzinfo=UTC) if parsed.year == 1 else datetime.max.replace(tzinfo=UTC)


def page_count(total: int, size: int) -> int:
    """Pages of ``size`` that ``total`` rows fill; an empty list still has its one (empty) page."""
    return max(1, -(-total // size))


def check_page(page: int, pages: int, name: str, of: str) -> None:
    """A page past the last is a BadParameter that says how many there are (``of``: "this run's calls")."""
    if page > pages:
        raise BadParameter(f"{name} {page} does not exist: {of} fill {pages} page{'' if pages == 1 else 's'}")


def choice_param(query: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    """One of ``choices`` from the query string; missing gives ``default``."""
    value = (query.get(name) or "").strip()
    if not value:
        return default
    if value not in choices:
        raise BadParameter(f"{name} must be one of: {', '.join(choices)}")
    return value


def jump_target(text: str) -> tuple[str, str | int]:
    """What the jump box names: ``("call", seq)``, ``("turn", n)`` or ``("name", text)`` (a run key or an
    item id, looked up in that order)."""
    text = text.strip()
    for kind, pattern in (("call", JUMP_CALL), ("turn", JUMP_TURN)):
        match = pattern.match(text)
        if match:
            return kind, int(match.group(1))
    return "name", text
