"""Issue 34: ``ctxview check`` checks a 100-call run in a fresh process, as CI would run it.

How long it takes is a figure of ``bench/check.py`` (start-up and check apart), not an assertion here: a
timed assertion fails on a slower or busier machine while the command is as fast as it was."""

import subprocess
import sys

from tests.check import stories

CAUSE = "volatile_system_prompt"


def test_a_100_call_run_is_checked_in_a_fresh_process(tmp_path):
    path = stories.write_protobuf(tmp_path / "run.pb.gz", stories.migration_spans(steps=100))
    done = subprocess.run(
        [sys.executable, "-m", "ctxview.cli", "check", str(path), "--fail-on-cause", CAUSE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # the date line broke the cache
    assert CAUSE in done.stdout, done.stdout
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.startswith("demo-migration-200-files"))
    assert row[2] == "100", done.stdout  # every call of the run was read and checked
