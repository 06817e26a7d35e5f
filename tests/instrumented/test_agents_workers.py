"""Issue 14's recordings through real workers at once: two worker processes on the real broker and
PostgreSQL take one span per batch in a shuffled order (some batches sent twice) and must end with the
sessions, agents and invocations that one in-process pass in the recorded order gives. Batches of one
trace are resolved one at a time (``ingest.locks.claim_traces``), so none misses another's rows."""

import pytest

from ctxview.celery import app as celery_app
from ingest.models import RawBatch
from tests import factories, services
from tests.instrumented.test_agents import (
    AGENT_SCENARIOS,
    check_sessions,
    fixture_batches,
    read,
    sessions_view,
)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def two_workers(service_env):
    celery_app.control.purge()  # messages left by an earlier, interrupted run
    workers = [services.start_worker(service_env, name=f"agents-{number}") for number in range(2)]
    for worker in workers:  # the logs are appended to: remember where this session's part starts
        worker.log_start = worker.log_path.stat().st_size
    yield workers
    for worker in workers:
        worker.stop()


def post(client, key: str, body: bytes) -> None:
    response = client.post(
        "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content


def test_two_workers_end_with_the_sessions_of_one_ordered_pass(two_workers, client):
    concurrent, reference = {}, {}
    for name in AGENT_SCENARIOS:
        project, key = factories.project_with_key(f"workers-{name}")
        _described, requests = fixture_batches(name, "shuffled")
        for body in requests + requests[::3]:  # a third sent twice, as an exporter retrying
            post(client, key, body)
        concurrent[name] = (project, key)

    def finished() -> bool:
        projects = [project for project, _ in concurrent.values()]
        pending = RawBatch.objects.filter(project__in=projects).exclude(status=RawBatch.Status.DONE).exists()
        return not pending and services.workers_idle()

    services.wait_for(finished, 240, "the workers to process and analyse every batch", interval=0.5)
    logs = [worker.log_path.read_text(errors="replace")[worker.log_start :] for worker in two_workers]
    assert not [log for log in logs if "Traceback" in log], logs
    assert all("process_batch_task" in log for log in logs)  # both took their share

    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        for name in AGENT_SCENARIOS:
            _project, key = factories.project_with_key(f"reference-{name}")
            for body in fixture_batches(name, "recorded")[1]:
                post(client, key, body)
            reference[name] = key
    finally:
        celery_app.conf.task_always_eager = previous

    for name in AGENT_SCENARIOS:
        described, _ = fixture_batches(name, "recorded")
        runs = read(client, concurrent[name][1])
        check_sessions(name, described, runs)
        assert sessions_view(runs) == sessions_view(read(client, reference[name])), name
