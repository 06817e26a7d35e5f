import pytest

from ctxview.celery import app as celery_app
from tests import factories


@pytest.fixture(autouse=True)
def _eager_tasks_unless_services(request):
    """Tasks run in-process, except in tests that use the real broker and worker."""
    eager = request.node.get_closest_marker("services") is None
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = eager
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture
def alice(db):
    return factories.user("alice")


@pytest.fixture
def bob(db):
    return factories.user("bob")


@pytest.fixture
def project_and_key(alice):
    return factories.project_with_key("alpha", owner=alice)


@pytest.fixture
def project(project_and_key):
    return project_and_key[0]


@pytest.fixture
def key(project_and_key):
    return project_and_key[1]
