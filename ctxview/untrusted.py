"""Checks on what people and traces send us, as pure functions: text PostgreSQL cannot store, JSON too
deep to walk, and spreadsheet cells a spreadsheet would run as formulas. No Django here.
"""

import re
from collections.abc import Iterable

from ctxcore.jsonpath import where

# PostgreSQL text and jsonb cannot hold NUL; UTF-8 (the database encoding) cannot hold a lone surrogate.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# Deeper than any document ctxview writes; a deeper one is an attack on the recursion limit.
MAX_JSON_DEPTH = 64


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character"
    return "contains a lone UTF-16 surrogate"


def first_text_problem(pairs: Iterable[tuple[str, str]]) -> str | None:
    """The first ``name: problem`` among (name, value) pairs, or None."""
    for name, value in pairs:
        if problem := text_problem(name):
            return f"a parameter name {problem}"
        if problem := text_problem(value):
            return f"{name} {problem}"
    return None


def json_problem(value, depth: int = 0, path: tuple = ()) -> str | None:
    """Why a parsed JSON value cannot be stored (a key or string that ``text_problem`` refuses, or too
    deep a nesting), as ``path: problem``, or None."""
    if depth > MAX_JSON_DEPTH:
        return f"{where(path, 'the body')}: nested deeper than {MAX_JSON_DEPTH} levels"
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where(path, 'the body')}: {problem}" if problem else None
    if isinstance(value, dict):
        for key, item in value.items():
            if problem := text_problem(key):
                return f"{where(path, 'the body')}: a key {problem}"
            if problem := json_problem(item, depth + 1, (*path, key)):
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if problem := json_problem(item, depth + 1, (*path, index)):
                return problem
    return None


# OWASP "CSV Injection": a cell starting with one of these is read as a formula by spreadsheets.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A spreadsheet cell that is never run as a formula: text starting with = + - @ tab or CR gets a
    leading apostrophe (numbers are left alone, so a negative figure stays a number)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
