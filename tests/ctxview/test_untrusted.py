"""The pure checks on untrusted input (no Django, no database)."""

import pytest

from ctxview.untrusted import MAX_JSON_DEPTH, csv_cell, first_text_problem, json_problem, text_problem


@pytest.mark.parametrize(
    "value, problem",
    [
        ("plain, é, 😀, tab\there", None),
        ("a\x00b", "contains a NUL character"),
        ("\ud800", "contains a lone UTF-16 surrogate"),
        ("x\udfff", "contains a lone UTF-16 surrogate"),
    ],
)
def test_text_problem(value, problem):
    assert text_problem(value) == problem


def test_first_text_problem_names_the_parameter_or_says_it_is_a_name():
    assert first_text_problem([("ok", "fine"), ("item", "\x00")]) == "item contains a NUL character"
    assert first_text_problem([("\x00", "fine")]) == "a parameter name contains a NUL character"
    assert first_text_problem([("ok", "fine")]) is None


def test_json_problem_says_where():
    assert (
        json_problem({"body": "ok", "tags": ["a", {"x": "b\x00"}]}) == "tags[1].x: contains a NUL character"
    )
    assert json_problem({"k\ud800": 1}) == "the body: a key contains a lone UTF-16 surrogate"
    assert json_problem({"n": 1.5, "b": True, "none": None}) is None


def test_json_problem_stops_at_the_depth_limit():
    ok, deep = [], []
    for _ in range(MAX_JSON_DEPTH - 1):
        ok = [ok]
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    assert json_problem({"x": ok}) is None
    assert "nested deeper than" in json_problem({"x": deep})


@pytest.mark.parametrize(
    "value, cell",
    [
        ("=HYPERLINK(1)", "'=HYPERLINK(1)"),
        ("+1", "'+1"),
        ("-1+2", "'-1+2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("claude-4", "claude-4"),
        (-3, -3),  # a number stays a number
        (None, None),
    ],
)
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell
