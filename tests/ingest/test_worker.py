"""Ingest with a real broker, real worker processes and PostgreSQL."""

import pytest
from django.db import connection
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.models import RawBatch, Run, Span
from ingest.tasks import sweep_batches
from tests import otel, services

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def export(url: str, key: str, spans) -> SpanExportResult:
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    try:
        return exporter.export(spans)
    finally:
        exporter.shutdown()


def all_done(expected_batches: int):
    """Every batch processed and every run analysed."""

    def check():
        statuses = list(RawBatch.objects.values_list("status", flat=True))
        analysed = all(run.analysed_seq == run.call_count for run in Run.objects.all())
        return len(statuses) == expected_batches and set(statuses) == {"done"} and analysed

    return check


def test_a_real_worker_processes_what_the_receiver_enqueued(worker, live_server, key):
    spans = otel.agent_spans(calls=4)
    assert export(live_server.url, key, spans) == SpanExportResult.SUCCESS
    services.wait_for(all_done(1), 30, "the worker to process the batch")
    assert Span.objects.count() == 5


def test_a_batch_received_while_the_broker_is_down_is_kept_and_processed_after_the_sweeper(
    worker, service_env, key
):
    # A web process whose broker is unreachable: nothing listens on port 1.
    web, url = services.start_web(
        service_env | {"CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}, name="web-no-broker"
    )
    try:
        spans = otel.agent_spans(calls=2)
        assert export(url, key, spans) == SpanExportResult.SUCCESS
        assert "could not enqueue batch" in web.log()
    finally:
        web.stop()
    batch = RawBatch.objects.get()
    assert (batch.status, batch.item_count) == ("pending", 3)
    assert Span.objects.count() == 0

    assert sweep_batches(older_than_seconds=0) == 1  # this process has the working broker
    services.wait_for(all_done(1), 30, "the worker to process the swept batch")
    assert sorted(Span.objects.values_list("span_id", flat=True)) == sorted(
        format(span.context.span_id, "016x") for span in spans
    )


def test_the_same_batch_enqueued_many_times_is_stored_once(worker, live_server, key):
    spans = otel.agent_spans(calls=3)
    assert export(live_server.url, key, spans) == SpanExportResult.SUCCESS
    services.wait_for(all_done(1), 30, "the first processing")
    RawBatch.objects.update(status=RawBatch.Status.PENDING)  # as if the ack had been lost
    for _ in range(3):
        sweep_batches(older_than_seconds=0)
    services.wait_for(all_done(1), 30, "the redeliveries")
    assert Span.objects.count() == 4


def test_a_worker_keeps_its_database_connection_from_task_to_task(worker, live_server, key):
    # Celery's Django fixup closes the connection around every task unless CELERY_DB_REUSE_MAX is set:
    # a new PostgreSQL backend per task. The worker's sessions carry its name (services.start_worker).
    backends = []
    for batch in range(1, 4):
        assert export(live_server.url, key, otel.agent_spans(calls=2)) == SpanExportResult.SUCCESS
        services.wait_for(all_done(batch), 30, f"the worker to process batch {batch}")
        with connection.cursor() as cursor:
            cursor.execute(
                # This database's: another pytest-xdist worker's Celery worker has the same name.
                "SELECT pid, backend_start FROM pg_stat_activity"
                " WHERE application_name = %s AND datname = current_database()",
                ["ctxview-test-worker"],
            )
            backends.append(cursor.fetchall())
    assert len(backends[0]) == 1, backends  # kept open after the task
    assert backends[1] == backends[2] == backends[0]  # and the same session served the next ones
