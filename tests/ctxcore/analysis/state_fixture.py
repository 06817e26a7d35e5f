"""The stored analysis state of every STATE_SCHEMA version, as checked in under ``states/``.

A run's analysis state is stored (``Run.analysis_state``, the checkpoints) and read back by a later
version of ctxview. Its shape may change only with a new ``STATE_SCHEMA``, so an older state is refused
(``OutdatedState``: the run is analysed again from its first call) instead of read wrongly. The calls
below touch every part of the state: three agents with two kept (a retired lane), a nested invocation,
tools offered and called, a cache chain and a break, two versions of one source, a dominant tool
result, calibration.

``python -m tests.ctxcore.analysis.state_fixture`` writes ``states/schema-<STATE_SCHEMA>.json`` (run it
when you bump the schema, and keep the older files).
"""

import json
from dataclasses import replace
from pathlib import Path

from ctxcore.analysis import DEFAULT_CONFIG, STATE_SCHEMA
from tests.ctxcore.analysis.builders import analyse, call, item, message, system, tool

FOLDER = Path(__file__).parent / "states"
CONFIG = replace(DEFAULT_CONFIG, agents_kept=2)


def source(item_id: str, version: str) -> dict:
    return item(item_id, "retrieved", 300, f"{item_id}@{version}", source="src/app.py", version=version)


def calls() -> list:
    base = [tool("search"), system()]
    return [
        call(1, [*base, message(1)], agent="lead", tool_calls=[{"name": "search"}]),
        call(2, [*base, message(1), source("read-1", "v1"), message(2)], agent="lead", read=1900),
        call(3, [tool("fetch"), system("You research."), message(3)], agent="researcher", invocation="r1"),
        call(4, [*base, message(1), source("read-1", "v1"), source("edit-2", "v2")], agent="lead", read=1500),
        call(5, [system("You write."), message(5, tokens=50, bucket="tool_results")], agent="writer"),
        call(
            6, [system("You write, briefly."), message(5, tokens=5000, bucket="tool_results")], agent="writer"
        ),
        call(7, [*base, message(1), message(7)], agent="lead", read=0),
    ]


def state_after_calls() -> dict:
    _, state = analyse(calls(), config=CONFIG)
    return json.loads(json.dumps(state))


def path_of(schema: int) -> Path:
    return FOLDER / f"schema-{schema}.json"


def stored_schemas() -> list[int]:
    return sorted(int(path.stem.removeprefix("schema-")) for path in FOLDER.glob("schema-*.json"))


def main() -> None:
    FOLDER.mkdir(exist_ok=True)
    path_of(STATE_SCHEMA).write_text(json.dumps(state_after_calls(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {path_of(STATE_SCHEMA)}")


if __name__ == "__main__":
    main()
