"""Whether the real coding-agent CLIs can run here: a live CLI test calls ``require`` first.

Needs node, npm and the npm registry (the install is cached in .cache/cli), and root or user namespaces
for ``unshare -n``. Without them the test is skipped, with the reason; it fails instead when
CTXVIEW_REQUIRE_INSTRUMENTED=1, as in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.cli import record


def cannot_record() -> str | None:
    """Why this machine cannot run the recorder, or None."""
    for tool in ("node", "npm", "unshare", "ip", "git"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    unshare = record.unshare_command()
    probe = subprocess.run([*unshare, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace ({' '.join(unshare)}: {probe.stderr.strip()})"
    return None


def not_on_the_registry(cli: record.Cli) -> str | None:
    """Why the pinned CLI cannot be installed, or None; asks the registry once, briefly, if need be."""
    if record.installed_version(cli):
        return None
    spec = f"{cli.package}@{cli.version}"
    try:
        found = subprocess.run(["npm", "view", spec, "version"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return f"the npm registry did not answer for {spec} within 60 s"
    if found.returncode != 0 or cli.version not in found.stdout:
        return f"the npm registry does not serve {spec}: {found.stderr.strip()[-300:]}"
    return None


def require(cli: record.Cli) -> None:
    """Install ``cli`` (once), or skip the test, with the reason (or fail: CTXVIEW_REQUIRE_INSTRUMENTED=1)."""
    reason = cannot_record() or not_on_the_registry(cli)
    if reason is None:
        try:
            record.install(cli)
        except (record.RecordError, subprocess.TimeoutExpired) as exc:
            reason = f"cannot install the CLI from npm: {exc}"
    if reason:
        if os.environ.get("CTXVIEW_REQUIRE_INSTRUMENTED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
