import os

import pytest


@pytest.fixture(scope="session")
def scenario_folder(tmp_path_factory):
    """Where ``replay_scenario`` keeps each scenario's capture: one folder for every xdist worker of the
    session (the parent of the workers' own base folders)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "instrumented-scenarios"
    folder.mkdir(exist_ok=True)
    return folder
