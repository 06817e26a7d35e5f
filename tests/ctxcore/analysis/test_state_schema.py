"""A guard for whoever changes the analysis state: its shape changes only with STATE_SCHEMA, each
schema's state is checked in, today's is read and continued as if never stored, and every older one is
refused with OutdatedState (so ingest analyses the run again from its first call)."""

import json

import pytest

from ctxcore.analysis import STATE_SCHEMA, OutdatedState, analyse_call
from tests.ctxcore.analysis.builders import call, message, system
from tests.ctxcore.analysis.state_fixture import CONFIG, path_of, state_after_calls, stored_schemas

WRITE = "python -m tests.ctxcore.analysis.state_fixture"


def shape(value) -> object:
    """The structure of a JSON value: a dict's keys with their values' shapes, a list as the set of its
    elements' shapes, a scalar as its type (an int where a float may be is a float)."""
    if isinstance(value, dict):
        return {key: shape(entry) for key, entry in sorted(value.items())}
    if isinstance(value, list):
        found = []
        for entry in value:
            if shape(entry) not in found:
                found.append(shape(entry))
        return sorted(found, key=json.dumps)
    if isinstance(value, bool) or value is None:
        return type(value).__name__
    return "number" if isinstance(value, int | float) else type(value).__name__


def differences(stored, today, path: str = "state") -> list[str]:
    if isinstance(stored, dict) and isinstance(today, dict):
        return [
            line
            for key in sorted({*stored, *today})
            for line in (
                [f"{path}.{key}: only in the stored state"]
                if key not in today
                else [f"{path}.{key}: new"]
                if key not in stored
                else differences(stored[key], today[key], f"{path}.{key}")
            )
        ]
    return [] if stored == today else [f"{path}: {json.dumps(stored)[:120]} -> {json.dumps(today)[:120]}"]


def test_todays_schema_has_its_state_checked_in():
    assert STATE_SCHEMA in stored_schemas(), (
        f"STATE_SCHEMA is {STATE_SCHEMA} but tests/ctxcore/analysis/states/ has no "
        f"schema-{STATE_SCHEMA}.json: run `{WRITE}` and keep the older files"
    )


def test_the_state_keeps_its_shape_unless_the_schema_is_bumped():
    stored = json.loads(path_of(STATE_SCHEMA).read_text())
    changed = differences(shape(stored), shape(state_after_calls()))
    assert not changed, (
        "the analysis state's shape changed, but not STATE_SCHEMA (ctxcore/analysis/run.py): a stored state "
        "of the old shape would be read as the new one. Bump STATE_SCHEMA, then run "
        f"`{WRITE}`.\n" + "\n".join(changed[:20])
    )


def test_todays_stored_state_is_continued_as_if_it_had_never_been_stored():
    stored = json.loads(path_of(STATE_SCHEMA).read_text())
    following = call(8, [system(), message(1), message(8)], agent="lead", read=1000)
    from_disk = analyse_call(stored, following, CONFIG)
    in_memory = analyse_call(state_after_calls(), following, CONFIG)
    assert from_disk[0].to_dict() == in_memory[0].to_dict()
    assert from_disk[1] == in_memory[1]


def test_every_older_stored_state_is_refused_so_the_run_is_analysed_again():
    """The checked-in states of earlier schemas, and today's relabelled as the schema before it."""
    today = json.loads(path_of(STATE_SCHEMA).read_text())
    older = [json.loads(path_of(schema).read_text()) for schema in stored_schemas() if schema != STATE_SCHEMA]
    for stored in [*older, {**today, "schema": STATE_SCHEMA - 1}]:
        with pytest.raises(OutdatedState, match=f"state schema {stored['schema']}, expected {STATE_SCHEMA}"):
            analyse_call(stored, call(stored["seq"] + 1, [system()]), CONFIG)
