"""Retention: old runs go with every row under them; content still in use and pending batches stay."""

import gzip
import zlib
from datetime import timedelta

from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview.models import Label, Note
from ingest import otlp
from ingest.models import AnalysisCheckpoint, Call, Content, Finding, LogRecord, RawBatch, Run, Span
from ingest.retention import apply_retention, compact_raw_batches
from ingest.tasks import apply_retention_task
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

SHARED = user_message("a question both runs asked")


def send_run(send, key: str, trace: bytes, own: str):  # noqa: F811
    for number in (1, 2):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=trace,
            number=number,
            messages=[SHARED, user_message(f"{own} {number}")],
            attributes={"gen_ai.conversation.id": key, "gen_ai.usage.input_tokens": 10},
        )
        send(request)
    return Run.objects.get(key=key)


def test_old_runs_go_with_their_calls_spans_findings_notes_and_unshared_content(send, project, alice):  # noqa: F811
    old = send_run(send, "old", b"\x01" * 16, "old only")
    new = send_run(send, "new", b"\x02" * 16, "new only")
    Note.objects.create(project=project, run=old, author=alice, body="n")
    Label.objects.create(project=project, run=old, name="incident")
    Run.objects.filter(id=old.id).update(last_call_at=timezone.now() - timedelta(days=31))
    Run.objects.filter(id=new.id).update(last_call_at=timezone.now() - timedelta(days=29))
    Span.objects.update(received_at=timezone.now())  # spans age by when they arrived (and started)
    RawBatch.objects.update(received_at=timezone.now() - timedelta(days=5))
    pending = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=b"x",
        content_type="protobuf",
        wire_bytes=1,
        item_count=1,
        received_at=timezone.now() - timedelta(days=9),
    )
    old_hashes = {item["hash"] for call in old.calls.all() for item in call.items}
    new_hashes = {item["hash"] for call in new.calls.all() for item in call.items}

    totals = apply_retention(project)

    assert list(Run.objects.values_list("key", flat=True)) == ["new"]
    assert totals["runs"] == 1 and totals["calls"] == 2
    assert not Call.objects.filter(run_id=old.id).exists()
    assert not Span.objects.filter(trace_id=("01" * 16)).exists()
    assert Span.objects.filter(trace_id=("02" * 16)).exists()
    assert not Note.objects.exists() and not Label.objects.exists()
    assert not Finding.objects.filter(run_id=old.id).exists()
    assert not AnalysisCheckpoint.objects.filter(run_id=old.id).exists()
    stored = set(Content.objects.values_list("hash", flat=True))
    assert new_hashes <= stored  # the shared question is still used by the new run
    assert not (old_hashes - new_hashes) & stored
    # Raw batches older than 3 days are gone, except the one still pending.
    assert list(RawBatch.objects.values_list("id", flat=True)) == [pending.id]
    assert LogRecord.objects.count() == 0


def test_the_retention_task_twice_deletes_nothing_more(send, project):  # noqa: F811
    old = send_run(send, "old", b"\x01" * 16, "x")
    Run.objects.filter(id=old.id).update(last_call_at=timezone.now() - timedelta(days=60))
    first = apply_retention_task()
    second = apply_retention_task()
    assert first["runs"] == 1
    assert set(second.values()) == {0}


def test_a_child_run_left_as_a_link_goes_when_it_is_old(send, project):  # noqa: F811
    session = send_run(send, "session", b"\x03" * 16, "session")
    link = Run.objects.create(project=project, key="child", key_source="gen_ai.conversation.id")
    link.parent_run = session
    link.save()
    recent = Run.objects.create(project=project, key="recent-child", key_source="gen_ai.conversation.id")
    Run.objects.filter(id=link.id).update(updated_at=timezone.now() - timedelta(days=31))
    Run.objects.filter(id=session.id).update(last_call_at=timezone.now() - timedelta(days=1))

    apply_retention(project)

    assert sorted(Run.objects.values_list("key", flat=True)) == ["recent-child", "session"]
    assert Run.objects.get(id=recent.id).call_count == 0


def test_processed_batches_are_recompressed_once_and_still_read_the_same(send, project):  # noqa: F811
    send_run(send, "run", b"\x03" * 16, "own")
    pending = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=zlib.compress(b"not processed", 1),
        content_type="protobuf",
        wire_bytes=13,
        item_count=1,
    )
    before = {batch.id: bytes(batch.body) for batch in RawBatch.objects.filter(status=RawBatch.Status.DONE)}
    assert len(before) == 2
    assert compact_raw_batches(project) == 2
    for batch in RawBatch.objects.filter(id__in=before):
        assert batch.compacted
        assert otlp.stored_request(bytes(batch.body)) == otlp.stored_request(before[batch.id])
        assert bytes(batch.body)[1] >> 6 == 3  # the zlib header's level: the best
    pending.refresh_from_db()
    assert not pending.compacted and zlib.decompress(bytes(pending.body)) == b"not processed"
    assert compact_raw_batches(project) == 0


def test_a_batch_stored_gzipped_as_sent_is_recompressed_into_zlib(project):
    request = b"a request " * 1000
    batch = RawBatch.objects.create(
        project=project,
        signal="traces",
        status=RawBatch.Status.DONE,
        body=gzip.compress(request),
        content_type="protobuf",
        wire_bytes=100,
        item_count=1,
    )
    assert compact_raw_batches(project) == 1
    batch.refresh_from_db()
    assert bytes(batch.body)[:1] == b"\x78" and otlp.stored_request(bytes(batch.body)) == request
