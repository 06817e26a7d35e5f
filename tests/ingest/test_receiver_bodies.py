"""How the receiver reads request bodies, against real servers (runserver and gunicorn), a real worker
and PostgreSQL: a body without Content-Length, bodies at and over the limits, the in-flight budget."""

import gzip
import http.client
import os
import threading
import time
from urllib.parse import urlsplit

import pytest
import requests
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ingest.models import RawBatch, Span
from tests import factories, otel, services

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

PROTOBUF = "application/x-protobuf"
SERVERS = ["runserver", "gunicorn"]


@pytest.fixture(scope="module", params=SERVERS)
def web(request, service_env, worker):
    process, url = services.start_web(
        service_env | {"CTXVIEW_INGEST_MAX_BODY_BYTES": str(LIMIT)},
        name=f"web-bodies-{request.param}",
        server=request.param,
    )
    yield request.param, url
    process.stop()


LIMIT = 8 * 1024 * 1024  # CTXVIEW_INGEST_MAX_BODY_BYTES of the servers started here


def post_chunked(url: str, key: str, body: bytes, chunk: int = 1000, **headers) -> tuple[int, bytes]:
    """POST ``body`` with Transfer-Encoding: chunked and no Content-Length, as http.client sends it."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v1/traces",
            body=(body[start : start + chunk] for start in range(0, len(body), chunk)),
            headers={"Content-Type": PROTOBUF, "Authorization": f"Bearer {key}", **headers},
            encode_chunked=True,
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def wait_for_spans(count: int, timeout: float = 30) -> None:
    services.wait_for(
        lambda: (
            Span.objects.count() == count
            and set(RawBatch.objects.values_list("status", flat=True)) == {"done"}
        ),
        timeout,
        f"{count} spans stored by the worker",
    )


def test_a_chunked_export_is_stored_or_refused_never_acknowledged_and_dropped(web, key):
    server, url = web
    request = factories.trace_request(spans=5)
    status, answer = post_chunked(url, key, request.SerializeToString())
    if server == "gunicorn":
        # gunicorn decodes the chunked body (wsgi.input_terminated): it is read and stored.
        assert status == 200, answer
        wait_for_spans(5)
    else:
        # runserver cannot decode it: 411 (the exporter is told), nothing stored.
        assert status == 411, answer
        assert b"Content-Length" in answer
        assert not RawBatch.objects.exists()


def test_a_chunked_gzip_export_in_tiny_chunks(web, key):
    server, url = web
    body = gzip.compress(factories.trace_request(spans=3).SerializeToString())
    status, answer = post_chunked(url, key, body, chunk=7, **{"Content-Encoding": "gzip"})
    if server == "gunicorn":
        assert status == 200, answer
        wait_for_spans(3)
        assert RawBatch.objects.get().wire_bytes == len(body)
    else:
        assert status == 411, answer
        assert not RawBatch.objects.exists()


# runserver answers 411 before reading a chunked body: the client's send then fails (tested above).
@pytest.mark.parametrize("web", ["gunicorn"], indirect=True)
def test_a_chunked_body_over_the_limit_is_refused_with_413(web, key):
    _, url = web
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].name = "x" * (LIMIT + 10)
    status, answer = post_chunked(url, key, request.SerializeToString(), chunk=64 * 1024)
    assert status == 413, answer
    assert b"limit" in answer
    assert not RawBatch.objects.exists()


def test_the_real_exporter_still_delivers(web, key):
    _, url = web
    exporter = OTLPSpanExporter(
        endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    try:
        assert exporter.export(otel.agent_spans(calls=3)) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    wait_for_spans(4)


def test_many_small_gzip_members_are_read_in_linear_time(web, key):
    # 6 MB of empty gzip members, then the export: the old decompress took about a minute here.
    body = gzip.compress(b"") * 300_000 + gzip.compress(factories.trace_request(spans=2).SerializeToString())
    # (That it is linear is counted in tests/ingest/test_otlp.py; here: the server reads it all.)
    response = requests.post(f"{web[1]}/v1/traces", data=body, headers=headers(key, True), timeout=120)
    assert response.status_code == 200, response.content
    wait_for_spans(2)


@pytest.fixture(scope="module")
def budget_web(service_env, worker):
    """gunicorn with 4 threads and a budget of 30 MB of bodies in flight."""
    process, url = services.start_web(
        service_env | {"CTXVIEW_INGEST_MAX_INFLIGHT_BYTES": str(30_000_000)},
        name="web-bodies-budget",
        server="gunicorn",
    )
    yield url
    process.stop()


def test_concurrent_gzip_bombs_are_held_to_the_budget_and_retried_into_the_store(budget_web, key):
    # Each body is ~20 KB of gzip holding a 20 MB attribute: two at once would pass the budget.
    bodies = []
    for _ in range(4):
        request = factories.trace_request(spans=1)
        span = request.resource_spans[0].scope_spans[0].spans[0]
        span.trace_id, span.span_id = os.urandom(16), os.urandom(8)
        span.attributes.append(factories.kv("blob", "a" * 20_000_000))
        bodies.append(gzip.compress(request.SerializeToString(), 9))
    answers: list[list[int]] = [[] for _ in bodies]
    start = threading.Barrier(len(bodies))

    def client(number: int) -> None:
        start.wait()
        # As an exporter does: a 503 is retried after its Retry-After.
        for _ in range(20):
            response = requests.post(
                f"{budget_web}/v1/traces", data=bodies[number], headers=headers(key, True), timeout=120
            )
            answers[number].append(response.status_code)
            if response.status_code != 503:
                return
            assert response.headers["Retry-After"] == "5"
            assert "too many large requests" in status_pb2.Status.FromString(response.content).message
            time.sleep(0.2)  # not the 5 s an exporter waits: the test only needs the budget freed

    threads = [threading.Thread(target=client, args=(number,)) for number in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [statuses[-1] for statuses in answers] == [200] * len(bodies), answers
    assert 503 in sum(answers, []), f"no request was refused: {answers}"
    wait_for_spans(len(bodies), timeout=120)


def headers(key: str, compressed: bool = False) -> dict[str, str]:
    found = {"Authorization": f"Bearer {key}", "Content-Type": PROTOBUF}
    if compressed:
        found["Content-Encoding"] = "gzip"
    return found
