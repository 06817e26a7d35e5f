"""The check's engine (ctxview/check/engine.py) in a process of its own, as the command runs it."""

import json
import os
import subprocess
import sys

TWICE = """
import json, sys
from ctxview.check import engine, inputs
from django.conf import settings

first = engine.analyse(inputs.read_paths([sys.argv[1]]))
second = engine.analyse(inputs.read_paths([sys.argv[2]]))
print(json.dumps({"first": first, "second": second, "engine": settings.CTXVIEW_CHECK_ENGINE}))
"""


def test_each_check_of_a_process_starts_from_an_empty_database(broken_pb, fixed_json):
    env = {name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        [sys.executable, "-c", TWICE, broken_pb, fixed_json], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert runs["engine"] is True  # configured in code, by the engine, in that process
    [first], [second] = runs["first"], runs["second"]
    assert (first["run"]["id"], second["run"]["id"]) == (1, 1)  # the first run's rows are gone
    assert first["run"]["findings"]["cache_invalidated"] == 6
    assert second["run"]["findings"]["cache_invalidated"] == 3
    assert "volatile_system_prompt" not in second["run"]["accounting"]["cache_breaks"]["by_cause"]
