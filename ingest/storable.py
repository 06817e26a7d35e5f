"""Text and JSON as PostgreSQL can store them: no NUL, no lone surrogate, no NaN or Infinity. Used by
the OTLP decoder and by the families reading JSON carried in string attributes. No Django here."""

import json
import re
from typing import Any


def nul_free(value: str) -> str:
    """The text with NUL (which PostgreSQL text and jsonb cannot hold) as U+FFFD; the rest kept."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(value: str) -> str:
    """The text with what PostgreSQL cannot store (NUL, lone surrogates) replaced by U+FFFD."""
    value = nul_free(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # PostgreSQL stores UTF-8: a lone surrogate cannot be written
        return _LONE_SURROGATE.sub("\ufffd", value)
    return value


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def json_value(text: str) -> Any:
    """JSON carried in a string attribute, parsed. ValueError when it is not JSON, including JSON nested
    too deep for the parser and NaN or Infinity (jsonb has neither). JSON escapes can spell NUL and lone
    surrogates, which PostgreSQL cannot store: they become U+FFFD, as in attribute strings."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if "\\u" not in text:  # only an escape can spell them: the attribute string itself is clean
        return value
    # Iteratively: the value may nest as deep as the parser allowed, close to the recursion limit.
    root = [value]
    pending: list[tuple[Any, Any]] = [(root, 0)]
    while pending:
        container, key = pending.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = storable_text(item)
        elif isinstance(item, list):
            pending.extend((item, index) for index in range(len(item)))
        elif isinstance(item, dict):
            container[key] = item = {storable_text(name): child for name, child in item.items()}
            pending.extend((item, name) for name in item)
    return root[0]
