"""The pytest plugin (issue 34): a sample test module (plugin_sample.py) run by a pytest of its own, in a
project without Django settings and in one whose Django is configured; and off unless asked."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).with_name("plugin_sample.py")
UNTOUCHED = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider


def test_tracing_is_left_alone():
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
"""


def pytest_in(folder: Path, *args, django: bool = False) -> subprocess.CompletedProcess:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("DJANGO_", "PYTEST_"))}
    if django:
        env["DJANGO_SETTINGS_MODULE"] = "ctxview.settings"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args]
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("django", [False, True], ids=["without-django", "with-django-configured"])
def test_a_sample_module_checks_its_agents_runs(tmp_path, django):
    shutil.copy(SAMPLE, tmp_path / "test_agent_context.py")
    done = pytest_in(tmp_path, "-p", "ctxview.pytest_plugin", "--ctxview", django=django)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith("4 passed")
    # --ctxview lists the runs the session checked.
    assert "ctxview: 3 runs checked" in done.stdout
    assert "volatile_system_prompt 29" in done.stdout


def test_the_plugin_is_off_unless_asked(tmp_path):
    (tmp_path / "test_untouched.py").write_text(UNTOUCHED)
    done = pytest_in(tmp_path)  # installed (its entry point), not asked
    assert done.returncode == 0, done.stdout + done.stderr
    done = pytest_in(tmp_path, "--ctxview")  # asked: the session's exporter is on a tracer provider it set
    assert done.returncode == 1
    assert "assert not True" in done.stdout
