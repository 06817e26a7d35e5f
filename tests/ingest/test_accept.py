"""ingest.accept, the path both receivers share, called directly."""

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest import accept, otlp
from ingest.models import IngestKey, RawBatch
from ingest.tasks import enqueue_batch
from tests import factories


def test_stores_the_batch_and_enqueues_it_only_on_commit(project, django_capture_on_commit_callbacks):
    data = factories.trace_request(spans=2).SerializeToString()
    with django_capture_on_commit_callbacks() as callbacks:
        answer = accept.accept(project, otlp.TRACES, data, otlp.PROTOBUF, wire_bytes=123)
        assert RawBatch.objects.count() == 1  # stored before the answer exists
    batch = RawBatch.objects.get()
    assert (batch.status, batch.item_count, batch.rejected_count, batch.wire_bytes) == ("pending", 2, 0, 123)
    assert [(callback.func, callback.args) for callback in callbacks] == [(enqueue_batch, (batch.id,))]
    assert ExportTraceServiceResponse.FromString(answer) == ExportTraceServiceResponse()


def test_an_empty_export_is_answered_without_a_batch(project, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        answer = accept.accept(project, otlp.TRACES, b"", otlp.PROTOBUF, wire_bytes=0)
    assert answer == b""
    assert callbacks == []
    assert RawBatch.objects.count() == 0


def test_a_full_backlog_refuses_with_the_configured_delay(project, settings):
    settings.CTXVIEW_INGEST_MAX_PENDING_BATCHES = 1
    settings.CTXVIEW_INGEST_RETRY_AFTER_SECONDS = 7
    data = factories.trace_request(spans=1).SerializeToString()
    accept.accept(project, otlp.TRACES, data, otlp.PROTOBUF, wire_bytes=len(data))
    with pytest.raises(accept.Unavailable) as refused:
        accept.accept(project, otlp.TRACES, data, otlp.PROTOBUF, wire_bytes=len(data))
    assert (refused.value.status, refused.value.retry_after) == (503, 7)
    assert RawBatch.objects.count() == 1


def test_authorise_refuses_a_revoked_key_and_a_key_over_its_rate_limit(project, key, settings, monkeypatch):
    assert accept.authorise(key) == project
    settings.CTXVIEW_INGEST_RATE_LIMIT = 1
    monkeypatch.setattr("ingest.ratelimit.time.time", lambda: 1_900_000_000.5)  # all in one second
    accept.authorise(key)
    with pytest.raises(accept.Unavailable) as limited:
        accept.authorise(key)
    assert (limited.value.message, limited.value.retry_after) == (
        "too many requests for this ingest key; retry later",
        1,
    )
    IngestKey.objects.get(project=project).revoke()
    with pytest.raises(accept.Unauthenticated, match="invalid or revoked ingest key"):
        accept.authorise(key)
