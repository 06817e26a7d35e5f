"""Figures the tests gather for the end of the session: fuzz cases run, fault scenarios' tallies.

Under pytest-xdist each worker gathers its own; tests/conftest.py sends them to the controller when a
worker ends (``workeroutput``) and prints the merged tables there, as a single process would."""

from collections import Counter

from tests import services

# Cases run per fuzz test (hypothesis examples, schemathesis calls).
FUZZ_CASES: Counter = Counter()
# One row per fault scenario (tests/faults/stack.Tally.row()).
FAULT_ROWS: list[tuple[str, ...]] = []


def gathered() -> dict:
    """What this process gathered, as plain data that execnet can send."""
    return {"fuzz_cases": dict(FUZZ_CASES), "fault_rows": [list(row) for row in FAULT_ROWS]}


def merge(sent: dict) -> None:
    """Add what a worker gathered to this process's figures."""
    FUZZ_CASES.update(sent.get("fuzz_cases", {}))
    FAULT_ROWS.extend(tuple(row) for row in sent.get("fault_rows", []))


def write(name: str, text: str) -> None:
    """Keep a table in test-artifacts/ (CI keeps the folder)."""
    services.ARTIFACTS.mkdir(exist_ok=True)
    services.artifact(name).write_text(text + "\n")
