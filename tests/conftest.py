import os

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.test.testcases import QuietWSGIRequestHandler

from ctxview.celery import app as celery_app
from tests import factories, services, summary

# Under pytest-xdist every worker has a database of its own (pytest-django) and a task queue of its own
# on the shared broker, so one worker's Celery processes never take another's tasks. Set before any task
# is sent; the worker processes the tests start read it from the environment.
if worker_id := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["CTXVIEW_TASK_QUEUE"] = f"ctxview-tests-{worker_id}"
    celery_app.conf.task_default_queue = os.environ["CTXVIEW_TASK_QUEUE"]

# The live server (pytest-django's live_server) writes a response's headers and body in separate small
# sends; with Nagle's algorithm on, the body waits for the client's delayed ACK: ~40 ms added to every
# request a test makes to it. The real server (gunicorn) sets TCP_NODELAY as well.
QuietWSGIRequestHandler.disable_nagle_algorithm = True


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # a pytest-xdist worker: send what it gathered
        session.config.workeroutput["summary"] = summary.gathered()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    summary.merge(getattr(node, "workeroutput", {}).get("summary", {}))


def pytest_terminal_summary(terminalreporter):
    if summary.FUZZ_CASES:
        from tests.fuzz.conftest import summary_lines

        lines = summary_lines(summary.FUZZ_CASES)
        terminalreporter.write_sep("-", "fuzz cases run")
        for line in lines:
            terminalreporter.write_line(line)
        summary.write("fuzz.txt", "fuzz cases run\n" + "\n".join(lines))
    if summary.FAULT_ROWS:
        from tests.faults.stack import format_table

        table = format_table(summary.FAULT_ROWS)
        terminalreporter.write_sep("-", "fault scenarios: what became of every acknowledged span")
        terminalreporter.write_line(table)
        summary.write("faults.txt", table)


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """Django's default hasher takes about half a second a password on this machine, and most tests make
    a user or log one in: a fifth of the suite's time went to it. The tests are about who may do what,
    not how a password is stored; servers the tests start as processes (the demo, gunicorn) keep the
    default hasher."""
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _eager_tasks_unless_services(request):
    """Tasks run in-process, except in tests that use the real broker and worker."""
    eager = request.node.get_closest_marker("services") is None
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = eager
    yield
    if not eager and "worker" in request.fixturenames:
        # The test's tasks may still be running (an analysis enqueued after a batch): let the workers
        # finish before the database is flushed under them.
        services.wait_for(services.workers_idle, 60, "the workers to finish their tasks", interval=0.3)
    celery_app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Login failures and rate-limit counts live in the cache: one test's must not lock out the next's."""
    yield
    cache.clear()


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


@pytest.fixture
def send_as(client, django_capture_on_commit_callbacks):
    """POST a traces request with an ingest key, running what the receiver enqueues on commit."""

    def send_as(key: str, request) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                "/v1/traces",
                request.SerializeToString(),
                content_type="application/x-protobuf",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
        assert response.status_code == 200, response.content

    return send_as


@pytest.fixture(scope="session")
def broker_url():
    url = os.environ.get("CELERY_BROKER_URL")
    if not url:
        services.require("CELERY_BROKER_URL (a Redis or RabbitMQ broker)")
    return url


@pytest.fixture(scope="session")
def database_url(django_db_setup, django_db_blocker):
    """The URL of the PostgreSQL test database, for processes started by the tests."""
    from django.db import connection

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL (PostgreSQL)")
    return services.postgres_url(connection.settings_dict)


@pytest.fixture(scope="session")
def service_env(database_url, broker_url):
    return os.environ | {"DATABASE_URL": database_url, "CELERY_BROKER_URL": broker_url}


@pytest.fixture(scope="session")
def worker(service_env):
    """A real Celery worker process on the real broker and the PostgreSQL test database."""
    celery_app.control.purge()  # messages left by an earlier, interrupted run
    process = services.start_worker(service_env)
    yield process
    process.stop()
