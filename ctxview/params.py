"""Query-string parameters of the pages and panels, validated once: a bad one raises ``BadParameter`` with
the sentence the 400 shows."""

import re
from collections.abc import Mapping

# The jump box: "#57" or "call 57" names a call of the current run, "turn 40" a turn; anything else is a
# run key or an item id.
JUMP_CALL = re.compile(r"^(?:#|call\s*)(\d{1,9})$", re.IGNORECASE)
JUMP_TURN = re.compile(r"^turn\s*(\d{1,9})$", re.IGNORECASE)


class BadParameter(ValueError):
    """A query parameter the UI cannot use; the message is shown to the user as is."""


def int_param(
    query: Mapping[str, str], name: str, default: int | None, minimum: int, maximum: int
) -> int | None:
    """A whole number from the query string, within bounds; empty or missing gives ``default``."""
    value = (query.get(name) or "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadParameter(f"{name} must be a whole number, not {value[:40]!r}") from None
    if not minimum <= number <= maximum:
        raise BadParameter(f"{name} must be between {minimum} and {maximum}")
    return number


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
