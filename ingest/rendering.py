"""``ctxcore.vocabulary.render``, written by orjson where orjson writes the same bytes.

A rendered message is hashed, so its text must be exactly what the json module writes. orjson writes
strings (every code point compared), integers, booleans and null the same way, about twenty times
faster; it writes floats another way, and refuses lone surrogates, integers over 64 bits, non-string
keys and deep nesting: those go to the json module. The vocabulary stays stdlib-only for the SDK."""

from typing import Any

import orjson

from ctxcore.vocabulary import render as render_with_json

_PLAIN = (str, int, bool)


def render(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        plain = _without_floats(value)
    except RecursionError:  # nested deeper than the check goes: the json module decides
        plain = False
    if plain:
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:
            pass
    return render_with_json(value)


def _without_floats(value: Any) -> bool:
    """Whether ``value`` holds only dicts, lists, strings, integers, booleans and None."""
    kind = type(value)
    if kind is dict or kind is list:
        for entry in value.values() if kind is dict else value:
            if type(entry) is not str and not _without_floats(entry):  # most entries are text
                return False
        return True
    return value is None or kind in _PLAIN
