"""The OTLP/gRPC receiver (``manage.py serve_otlp_grpc``) as a process, fed by the real OTLP/gRPC
exporters of the OpenTelemetry Python SDK and by raw gRPC calls where an exporter cannot send what a
test needs.

Embedded (SQLite, tasks run in the receiver: no worker) for the protocol; PostgreSQL with the real
broker and a real Celery worker for the production set and for an exporter retrying UNAVAILABLE.
"""

import gzip
import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.grpc_receiver import LOGS_SERVICE, RETRY_INFO_TRAILER, TRACE_SERVICE
from ingest.models import LogRecord, RawBatch, Run, Span
from tests import factories, otel, services

MAX_MESSAGE = 256 * 1024  # the receivers' decompressed limit here: a test message over it stays small


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=services.ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


@dataclass
class Embedded:
    """A receiver on an embedded ctxview of its own: SQLite in ``folder``, no broker."""

    env: dict[str, str]
    keys: list[str]
    port: int = 0

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"http://{self.target}"

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        database = Path(self.env["CTXVIEW_DATA_DIR"]) / "ctxview.sqlite3"
        with closing(sqlite3.connect(database, timeout=20)) as connection, connection:
            return connection.execute(sql, params).fetchall()

    def last_batch_id(self) -> int:
        return self.query("SELECT coalesce(max(id), 0) FROM ingest_rawbatch")[0][0]

    def batches_after(self, batch_id: int) -> list[tuple]:
        return self.query(
            "SELECT signal, status, content_type, item_count, rejected_count FROM ingest_rawbatch "
            "WHERE id > ? ORDER BY id",
            (batch_id,),
        )

    def stored_span_ids(self, spans) -> list[str]:
        wanted = [format(span.context.span_id, "016x") for span in spans]
        marks = ",".join("?" * len(wanted))
        return sorted(
            row[0]
            for row in self.query(f"SELECT span_id FROM ingest_span WHERE span_id IN ({marks})", wanted)
        )


@pytest.fixture(scope="module")
def embedded_site(tmp_path_factory):
    """A migrated embedded ctxview with three projects (one key each); the receivers below share it."""
    folder = tmp_path_factory.mktemp("grpc-embedded")
    env = {
        name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    env |= {"CTXVIEW_DATA_DIR": str(folder), "CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES": str(MAX_MESSAGE)}
    manage(env, "migrate", "--noinput", "-v0")
    keys = [
        manage(env, "createproject", slug).strip().splitlines()[-1] for slug in ("main", "rate", "backlog")
    ]
    return Embedded(env, keys)


def _serve(site: Embedded, name: str, root_certificate: bytes | None = None, **settings: str):
    env = site.env | settings
    process, port = services.start_grpc(env, name, root_certificate)
    return process, Embedded(env, site.keys, port)


@pytest.fixture(scope="module")
def embedded(embedded_site):
    process, receiver = _serve(embedded_site, "grpc-embedded")
    yield receiver
    process.stop()


@pytest.fixture(scope="module")
def limited(embedded_site):
    """Two requests per second per key, a backlog of one batch, retry after 3 s."""
    process, receiver = _serve(
        embedded_site,
        "grpc-limited",
        CTXVIEW_INGEST_RATE_LIMIT="2",
        CTXVIEW_INGEST_MAX_PENDING_BATCHES="1",
        CTXVIEW_INGEST_RETRY_AFTER_SECONDS="3",
    )
    yield receiver
    process.stop()


def bearer(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


def export_call(receiver: Embedded, request, key: str | None, service=TRACE_SERVICE):
    """One Export call with a generated stub: (response, None) or (None, the RpcError)."""
    with grpc.insecure_channel(receiver.target) as channel:
        if service == TRACE_SERVICE:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        else:
            stub = logs_service_pb2_grpc.LogsServiceStub(channel)
        try:
            return stub.Export(request, metadata=bearer(key) if key else (), timeout=10), None
        except grpc.RpcError as error:
            return None, error


def raw_call(receiver: Embedded, body: bytes, key: str, method=f"/{TRACE_SERVICE}/Export", compress=None):
    """Bytes sent as they are, for what no exporter would send; the RpcError it ends with."""
    with grpc.insecure_channel(receiver.target) as channel:
        call = channel.unary_unary(method)
        with pytest.raises(grpc.RpcError) as caught:
            call(body, metadata=bearer(key), timeout=10, compression=compress)
    return caught.value


def details_of(error: grpc.RpcError, kind):
    status = rpc_status.from_call(error)
    assert status is not None, "the error carries no google.rpc.Status"
    found = []
    for detail in status.details:
        if detail.Is(kind.DESCRIPTOR):
            message = kind()
            detail.Unpack(message)
            found.append(message)
    return status, found


def assert_retry_after(error: grpc.RpcError, seconds: int) -> None:
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    _, [retry] = details_of(error, error_details_pb2.RetryInfo)
    assert (retry.retry_delay.seconds, retry.retry_delay.nanos) == (seconds, 0)
    # The same delay in the trailer the Python exporter reads.
    trailer = dict(error.trailing_metadata())[RETRY_INFO_TRAILER]
    assert error_details_pb2.RetryInfo.FromString(trailer).retry_delay.seconds == seconds


# --- Embedded: the real exporters, no worker -----------------------------------------------------


@pytest.mark.parametrize(
    "compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip], ids=["plain", "gzip"]
)
def test_the_sdk_span_exporter_delivers_every_span_over_grpc(embedded, compression):
    spans = otel.agent_spans(calls=3)
    before = embedded.last_batch_id()
    exporter = OTLPSpanExporter(
        endpoint=embedded.endpoint, headers=bearer(embedded.keys[0]), compression=compression, timeout=10
    )
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()

    # Processed in the receiver's own process (eager tasks): stored, numbered and done with no worker.
    assert embedded.batches_after(before) == [("traces", "done", "protobuf", len(spans), 0)]
    assert embedded.stored_span_ids(spans) == sorted(format(span.context.span_id, "016x") for span in spans)
    chat_id = format(spans[0].context.span_id, "016x")
    [(name, trace_id)] = embedded.query(
        "SELECT name, trace_id FROM ingest_span WHERE span_id = ?", (chat_id,)
    )
    assert (name, trace_id) == ("chat model-1", format(spans[0].context.trace_id, "032x"))
    [(calls,)] = embedded.query(
        "SELECT count(*) FROM ingest_call c JOIN ingest_run r ON r.id = c.run_id WHERE r.key = ?",
        (format(spans[0].context.trace_id, "032x"),),
    )
    assert calls == 3


@pytest.mark.parametrize(
    "compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip], ids=["plain", "gzip"]
)
def test_the_sdk_log_exporter_delivers_every_record_over_grpc(embedded, compression):
    spans = otel.agent_spans(calls=1)
    records = otel.content_log_records(count=2, span=spans[0])
    before = embedded.last_batch_id()
    exporter = OTLPLogExporter(
        endpoint=embedded.endpoint, headers=bearer(embedded.keys[0]), compression=compression, timeout=10
    )
    assert exporter.export(records) == LogRecordExportResult.SUCCESS
    exporter.shutdown()

    assert embedded.batches_after(before) == [("logs", "done", "protobuf", 2, 0)]
    stored = embedded.query(
        "SELECT event_name, span_id FROM ingest_logrecord WHERE trace_id = ?",
        (format(spans[0].context.trace_id, "032x"),),
    )
    span_id = format(spans[0].context.span_id, "016x")
    assert stored == [("gen_ai.client.inference.operation.details", span_id)] * 2


def test_the_exporter_configured_only_by_the_readme_environment_variables_delivers(embedded, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", embedded.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer {embedded.keys[0]}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    spans = otel.agent_spans(calls=2)
    exporter = OTLPSpanExporter()
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()
    assert len(embedded.stored_span_ids(spans)) == 3


def test_the_same_spans_exported_twice_are_stored_once(embedded):
    spans = otel.agent_spans(calls=2)
    before = embedded.last_batch_id()
    for _ in range(2):
        exporter = OTLPSpanExporter(endpoint=embedded.endpoint, headers=bearer(embedded.keys[0]), timeout=10)
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
    assert len(embedded.batches_after(before)) == 2
    assert len(embedded.stored_span_ids(spans)) == 3


def test_the_key_is_accepted_in_x_ctxview_key(embedded):
    before = embedded.last_batch_id()
    with grpc.insecure_channel(embedded.target) as channel:
        stub = trace_service_pb2_grpc.TraceServiceStub(channel)
        response = stub.Export(
            factories.trace_request(spans=1), metadata=(("x-ctxview-key", embedded.keys[0]),), timeout=10
        )
    assert not response.HasField("partial_success")
    assert len(embedded.batches_after(before)) == 1


def test_the_health_service_reports_serving_for_both_services(embedded):
    with grpc.insecure_channel(embedded.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", TRACE_SERVICE, LOGS_SERVICE):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING


# --- Embedded: every refusal, with its code ------------------------------------------------------


@pytest.mark.parametrize(
    "key", [None, "cvk_000000000000_wrong", "not-a-key"], ids=["none", "unknown", "junk"]
)
def test_a_missing_or_wrong_key_is_unauthenticated_and_not_retried(embedded, key):
    before = embedded.last_batch_id()
    _, error = export_call(embedded, factories.trace_request(spans=1), key)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    expected = "missing ingest key: send the metadata 'authorization: Bearer <key>'"
    assert error.details().startswith(expected if key is None else "invalid or revoked ingest key")

    exporter = OTLPSpanExporter(endpoint=embedded.endpoint, headers=bearer(key) if key else None, timeout=10)
    started = time.monotonic()
    assert exporter.export(otel.agent_spans(calls=1)) == SpanExportResult.FAILURE
    assert time.monotonic() - started < 0.8  # no retry: the first back-off alone is 0.8 s or more
    exporter.shutdown()
    assert embedded.batches_after(before) == []


def test_a_malformed_message_is_invalid_argument_with_a_bad_request_detail(embedded):
    before = embedded.last_batch_id()
    error = raw_call(embedded, b"\xff\xff\xff\xff", embedded.keys[0])
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid protobuf ExportTraceServiceRequest" in error.details()
    status, [bad_request] = details_of(error, error_details_pb2.BadRequest)
    assert status.message == error.details()
    assert bad_request.field_violations[0].description == error.details()
    assert embedded.batches_after(before) == []


def test_a_logs_export_sent_to_the_trace_service_is_invalid_argument(embedded):
    logs = factories.logs_request(records=2)
    for record in logs.resource_logs[0].scope_logs[0].log_records:
        record.ClearField("trace_id")
        record.ClearField("span_id")
    error = raw_call(embedded, logs.SerializeToString(), embedded.keys[0])
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is this a logs export sent to /v1/traces?" in error.details()


def test_invalid_spans_are_reported_as_partial_success_and_the_rest_stored(embedded):
    request = factories.trace_request(spans=3)
    request.resource_spans[0].scope_spans[0].spans[1].span_id = bytes(8)
    before = embedded.last_batch_id()
    response, error = export_call(embedded, request, embedded.keys[0])
    assert error is None
    assert response.partial_success.rejected_spans == 1
    assert response.partial_success.error_message == (
        "rejected 1 of 3 spans; first: span 'chat model-2': span_id is all zeros"
    )
    assert embedded.batches_after(before) == [("traces", "done", "protobuf", 2, 1)]
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    stored = embedded.query("SELECT name FROM ingest_span WHERE trace_id = ? ORDER BY name", (trace_id,))
    assert stored == [("chat model-1",), ("chat model-3",)]


@pytest.mark.parametrize("compress", [None, grpc.Compression.Gzip], ids=["plain", "gzip"])
def test_a_message_over_the_limit_is_resource_exhausted(embedded, compress):
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].name = "x" * MAX_MESSAGE
    body = request.SerializeToString()
    assert len(gzip.compress(body)) < MAX_MESSAGE // 100  # gzipped, the wire carries little: a bomb
    before = embedded.last_batch_id()
    error = raw_call(embedded, body, embedded.keys[0], compress=compress)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in error.details()
    # Without RetryInfo, RESOURCE_EXHAUSTED is final (OTLP/gRPC).
    status = rpc_status.from_call(error)
    assert status is None or not any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details)
    assert RETRY_INFO_TRAILER not in dict(error.trailing_metadata() or ())
    assert embedded.batches_after(before) == []


def test_a_key_over_its_rate_limit_is_unavailable_with_a_retry_delay(limited):
    # Empty exports are answered without being stored: only the rate limit can refuse them.
    errors = [
        export_call(limited, trace_service_pb2.ExportTraceServiceRequest(), limited.keys[1])[1]
        for _ in range(5)
    ]
    assert errors[:2] == [None, None]
    refused = [error for error in errors if error is not None]
    assert refused, "five requests within a second or two, none refused by a limit of 2 per second"
    assert refused[0].details() == "too many requests for this ingest key; retry later"
    assert_retry_after(refused[0], 1)


def test_a_full_backlog_is_unavailable_with_a_retry_delay_and_stores_nothing(limited):
    [(project_id,)] = limited.query("SELECT id FROM ingest_project WHERE slug = 'backlog'")
    limited.query(
        "INSERT INTO ingest_rawbatch (project_id, signal, status, received_at, body, content_type,"
        " wire_bytes, item_count, rejected_count, attempts, error, redacted)"
        " VALUES (?, 'traces', 'pending', '2026-01-01 00:00:00', x'', 'protobuf', 0, 1, 0, 0, '', 0)",
        (project_id,),
    )
    before = limited.last_batch_id()
    try:
        _, error = export_call(limited, factories.trace_request(spans=2), limited.keys[2])
        assert error.details() == "ctxview is behind on processing; retry later"
        assert_retry_after(error, 3)
        assert limited.batches_after(before) == []
    finally:
        limited.query("DELETE FROM ingest_rawbatch WHERE id = ?", (before,))


def test_database_trouble_is_unavailable_with_a_retry_delay(embedded_site):
    # Nothing listens on port 1: every query fails as it does while PostgreSQL restarts.
    env = {
        "DATABASE_URL": "postgres://ctxview@127.0.0.1:1/ctxview",
        "CTXVIEW_INGEST_RETRY_AFTER_SECONDS": "2",
    }
    process, receiver = _serve(embedded_site, "grpc-no-database", **env)
    try:
        _, error = export_call(receiver, factories.trace_request(spans=1), receiver.keys[0])
        assert error.details() == "ctxview cannot reach its database right now; retry later"
        assert_retry_after(error, 2)
    finally:
        process.stop()


def test_tls_with_the_certificate_and_key_from_files(embedded_site, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    root = cert.read_bytes()
    tls = {"CTXVIEW_GRPC_TLS_CERT_FILE": str(cert), "CTXVIEW_GRPC_TLS_KEY_FILE": str(key)}
    process, receiver = _serve(embedded_site, "grpc-tls", root_certificate=root, **tls)
    try:
        assert "(TLS," in process.log()
        spans = otel.agent_spans(calls=1)
        exporter = OTLPSpanExporter(
            endpoint=f"https://{receiver.target}",
            credentials=grpc.ssl_channel_credentials(root_certificates=root),
            headers=bearer(receiver.keys[0]),
            timeout=10,
        )
        assert exporter.export(spans) == SpanExportResult.SUCCESS
        exporter.shutdown()
        assert len(receiver.stored_span_ids(spans)) == 2
        # A plaintext client gets no answer from a TLS port.
        _, error = export_call(receiver, factories.trace_request(spans=1), receiver.keys[0])
        assert error.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        process.stop()


def test_sigterm_stops_the_receiver_cleanly(embedded_site):
    process, _ = _serve(embedded_site, "grpc-stop")
    process.popen.terminate()
    assert process.popen.wait(timeout=30) == 0
    assert "stopping: finishing the requests in flight" in process.log()
    process.stop()


# --- PostgreSQL, the real broker and a real worker -----------------------------------------------


def all_done(batches: int):
    def check():
        statuses = list(RawBatch.objects.values_list("status", flat=True))
        analysed = all(run.analysed_seq == run.call_count for run in Run.objects.all())
        return len(statuses) == batches and set(statuses) == {"done"} and analysed

    return check


GRPC_APPLICATION_NAME = "ctxview-grpc-test"


@pytest.fixture(scope="module")
def postgres_grpc(service_env):
    """A receiver on the PostgreSQL test database and the real broker; a backlog of one batch, retry
    after 2 s (the exporter's own first back-off is 0.8 to 1.2 s, so its wait shows which it used)."""
    env = service_env | {
        "CTXVIEW_INGEST_MAX_PENDING_BATCHES": "1",
        "CTXVIEW_INGEST_RETRY_AFTER_SECONDS": "2",
        "PGAPPNAME": GRPC_APPLICATION_NAME,  # so a test can find its database connections
    }
    process, port = services.start_grpc(env, "grpc-postgres")
    yield f"http://127.0.0.1:{port}"
    process.stop()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_traces_and_logs_over_grpc_reach_postgresql_through_a_real_worker(
    worker, postgres_grpc, project, key
):
    spans = otel.agent_spans(calls=4)
    exporter = OTLPSpanExporter(
        endpoint=postgres_grpc, headers=bearer(key), compression=grpc.Compression.Gzip, timeout=10
    )
    assert exporter.export(spans) == SpanExportResult.SUCCESS
    exporter.shutdown()
    services.wait_for(all_done(1), 30, "the worker to process the traces batch")
    log_exporter = OTLPLogExporter(endpoint=postgres_grpc, headers=bearer(key), timeout=10)
    assert (
        log_exporter.export(otel.content_log_records(count=2, span=spans[0])) == LogRecordExportResult.SUCCESS
    )
    log_exporter.shutdown()
    services.wait_for(all_done(2), 30, "the worker to process the logs batch")

    assert sorted(Span.objects.filter(project=project).values_list("span_id", flat=True)) == sorted(
        format(span.context.span_id, "016x") for span in spans
    )
    assert (
        LogRecord.objects.filter(project=project, span_id=format(spans[0].context.span_id, "016x")).count()
        == 2
    )
    run = Run.objects.get(project=project)
    assert (run.call_count, run.analysed_seq) == (4, 4)


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_the_exporter_retries_unavailable_after_the_delay_given_and_the_batch_is_stored_once(
    worker, postgres_grpc, project, key, caplog
):
    blocker = RawBatch.objects.create(
        project=project, signal="traces", body=b"", content_type="protobuf", wire_bytes=0, item_count=1
    )
    spans = otel.agent_spans(calls=3)
    exporter = OTLPSpanExporter(endpoint=postgres_grpc, headers=bearer(key), timeout=20)
    result: list[SpanExportResult] = []
    sender = threading.Thread(target=lambda: result.append(exporter.export(spans)))
    sender.start()
    services.wait_for(
        lambda: "Transient error StatusCode.UNAVAILABLE" in caplog.text, 15, "the first refusal"
    )
    assert RawBatch.objects.count() == 1  # refused: nothing stored
    RawBatch.objects.filter(id=blocker.id).update(status=RawBatch.Status.DONE)  # the backlog clears
    sender.join(30)
    exporter.shutdown()

    assert result == [SpanExportResult.SUCCESS]
    # The delay the receiver gave, exactly: the exporter's own back-off has +-20 % jitter.
    assert "retrying in 2.00s" in caplog.text
    services.wait_for(all_done(2), 30, "the worker to process the retried batch")
    batch = RawBatch.objects.exclude(id=blocker.id).get()
    assert (batch.item_count, batch.rejected_count) == (4, 0)
    assert Span.objects.filter(project=project).count() == 4


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_database_connection_that_died_between_requests_is_replaced_not_reported(
    worker, postgres_grpc, project, key
):
    from django.db import connection

    target = postgres_grpc.removeprefix("http://")
    receiver = Embedded({}, [key], int(target.rsplit(":", 1)[1]))
    assert export_call(receiver, factories.trace_request(spans=1), key)[1] is None
    services.wait_for(all_done(1), 30, "the worker to process the batch")  # the backlog here is one batch
    # What a PostgreSQL restart or an idle-connection timeout does to the receiver's kept connections.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",  # not another xdist worker's
            [GRPC_APPLICATION_NAME],
        )
        assert cursor.fetchone()[0] >= 1
    # The next request checks its thread's connection first (close_old_connections), as Django does per
    # HTTP request, and reconnects: OK at once, not UNAVAILABLE.
    for number in range(2, 5):  # several threads of the pool may have held a connection
        _, error = export_call(receiver, factories.trace_request(spans=1), key)
        assert error is None, error.details()
        services.wait_for(all_done(number), 30, "the worker to process the batch")
