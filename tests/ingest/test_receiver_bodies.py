"""How the receiver reads request bodies, against real servers (runserver and gunicorn), a real worker
and PostgreSQL: a body without Content-Length, bodies at and over the limits, the in-flight budget."""

import gzip
import http.client
from urllib.parse import urlsplit

import pytest
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


LIMIT = 256 * 1024  # CTXVIEW_INGEST_MAX_BODY_BYTES of the servers started here


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


def wait_for_spans(count: int) -> None:
    services.wait_for(
        lambda: (
            Span.objects.count() == count
            and set(RawBatch.objects.values_list("status", flat=True)) == {"done"}
        ),
        30,
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


def test_a_chunked_body_over_the_limit_is_refused_with_413(web, key):
    server, url = web
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].name = "x" * (LIMIT + 10)
    status, answer = post_chunked(url, key, request.SerializeToString(), chunk=64 * 1024)
    assert status == (413 if server == "gunicorn" else 411), answer
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
