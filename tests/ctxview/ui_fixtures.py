"""A module-scoped project loaded with the demo runs (and a hostile run), shared by the UI view tests.

The runs are committed once per test module (outside the per-test transactions, which roll back what a
test adds) and deleted when the module is done.
"""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client
from django.utils import timezone

from ingest.models import Run
from tests import factories
from tests.ctxview import ui_data


@pytest.fixture(scope="module")
def inspect(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        viewer = factories.user("viewer")
        stranger = factories.user("stranger")
        project, key = factories.project_with_key("inspect", owner=viewer)
        other, _ = factories.project_with_key("elsewhere", owner=stranger)
        ui_data.post(ui_data.demo_requests(), key)
        ui_data.post(ui_data.hostile_requests(), key)
        # Received an hour ago: idle runs (a test that wants a live one says so).
        Run.objects.filter(project=project).update(updated_at=timezone.now() - timedelta(hours=1))
        runs = {run.key: run for run in Run.objects.filter(project=project)}
        try:
            yield SimpleNamespace(
                project=project,
                key=key,
                viewer=viewer,
                stranger=stranger,
                other=other,
                runs=runs,
                incident=runs["demo-incident-turn-40"],
                migration=runs["demo-migration-200-files"],
                timeout=runs["demo-order-service-timeout"],
                hostile=runs[ui_data.HOSTILE_RUN],
            )
        finally:
            project.delete()
            other.delete()
            viewer.delete()
            stranger.delete()


@pytest.fixture
def viewer_client(client, inspect, db):
    client.force_login(inspect.viewer)
    return client


@pytest.fixture
def stranger_client(inspect, db):
    """A member of another project only (its own client, so a test can use both)."""
    other = Client()
    other.force_login(inspect.stranger)
    return other
