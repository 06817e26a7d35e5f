"""The batch task: safe to run twice, failing cleanly on bad data."""

import zlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest import calls
from ingest.analyse import analyse_run
from ingest.models import Call, RawBatch, Run, Span
from ingest.store import process_batch
from ingest.tasks import process_batch_task, sweep_batches
from tests import factories, services
from tests.factories import user_message


def pending_batch(project, request=None, signal="traces") -> RawBatch:
    data = (request or factories.trace_request(spans=3)).SerializeToString()
    return RawBatch.objects.create(
        project=project,
        signal=signal,
        body=zlib.compress(data),
        content_type="protobuf",
        wire_bytes=len(data),
        item_count=3,
    )


def test_running_the_task_twice_leaves_the_same_end_state(project):
    batch = pending_batch(project)
    assert process_batch_task(batch_id=batch.id) == "done"
    state = list(Span.objects.order_by("span_id").values_list("span_id", "name", "attributes"))
    assert process_batch_task(batch_id=batch.id) == "skipped"
    assert list(Span.objects.order_by("span_id").values_list("span_id", "name", "attributes")) == state
    batch.refresh_from_db()
    assert (batch.status, batch.attempts, len(state)) == ("done", 1, 3)


def test_a_processed_batch_keeps_its_body_without_writing_it_again(project):
    # Writing the unchanged body back stored its few hundred KB anew: the costliest statement of a batch.
    batch = pending_batch(project)
    with CaptureQueriesContext(connection) as queries:
        assert process_batch(batch.id) == "done"
    updates = [query["sql"] for query in queries if query["sql"].startswith('UPDATE "ingest_rawbatch"')]
    assert len(updates) == 1 and '"body"' not in updates[0]
    assert bytes(RawBatch.objects.get(id=batch.id).body) == bytes(batch.body)


def test_two_batches_with_the_same_spans_store_them_once(project):
    request = factories.trace_request(spans=3)
    for batch in (pending_batch(project, request), pending_batch(project, request)):
        process_batch(batch.id)
    assert Span.objects.count() == 3
    assert set(RawBatch.objects.values_list("status", flat=True)) == {"done"}


def test_resources_are_stored_once_per_project(project):
    process_batch(pending_batch(project, factories.trace_request(spans=2, service="a")).id)
    process_batch(pending_batch(project, factories.trace_request(spans=2, service="a")).id)
    process_batch(pending_batch(project, factories.trace_request(spans=2, service="b")).id)
    assert sorted(project.resource_set.values_list("service_name", flat=True)) == ["a", "b"]


def test_a_batch_that_cannot_be_decoded_is_marked_failed_with_a_reason(project):
    batch = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=b"not zlib",
        content_type="protobuf",
        wire_bytes=8,
        item_count=1,
    )
    assert process_batch(batch.id) == "failed"
    batch.refresh_from_db()
    assert batch.error.startswith("stored body cannot be decoded: Error -3 while decompressing data")
    assert Span.objects.count() == 0


def test_a_missing_batch_is_skipped(db):
    assert process_batch(123456) == "skipped"


def test_strings_with_nul_bytes_are_stored(project):
    request = factories.trace_request(spans=1)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.name = "a\x00b"
    span.attributes.add(key="k\x00").value.string_value = "v\x00"
    process_batch(pending_batch(project, request).id)
    stored = Span.objects.get()
    assert stored.name == "a\ufffdb"
    assert stored.attributes["k\ufffd"] == "v\ufffd"


def test_the_sweeper_enqueues_only_batches_pending_long_enough(project):
    old = pending_batch(project)
    RawBatch.objects.filter(id=old.id).update(received_at=old.received_at.replace(year=2020))
    fresh = pending_batch(project, factories.trace_request(spans=1))
    assert sweep_batches(older_than_seconds=60) == 1  # tasks are eager here: it runs at once
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.status, fresh.status) == ("done", "pending")


def test_a_call_stored_meanwhile_by_another_worker_is_retried_not_stored_twice(project, monkeypatch):
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=b"\x07" * 16,
        number=1,
        messages=[user_message("is the queue draining?")],
        attributes={"gen_ai.conversation.id": "race", "gen_ai.usage.input_tokens": 40},
    )
    first, second = pending_batch(project, request), pending_batch(project, request)
    assert process_batch(first.id) == "done"
    # The second batch looked for stored calls before the first committed (another worker, at once).
    checks = []

    def checked_too_early(batch, records):
        checks.append(len(records))
        return records if len(checks) == 1 else stored_check(batch, records)

    stored_check = calls._new_records
    monkeypatch.setattr(calls, "_new_records", checked_too_early)
    # Run here, as a worker would: the check for a join inside a task is Celery's process-wide flag, which
    # another test of this process may have left set (an order-dependent failure in CI).
    result = process_batch_task.apply(kwargs={"batch_id": second.id})
    assert result.get(disable_sync_subtasks=False) == "done"
    assert checks == [1, 1]  # failed on the unique key, retried, and then found the call stored
    assert Call.objects.count() == 1
    assert (Run.objects.get().call_count, Run.objects.get().analysed_seq) == (1, 1)
    second.refresh_from_db()
    assert (second.status, second.attempts) == ("done", 1)


# --- Not waiting for another batch (issue 19) -------------------------------------------------------


def _held_elsewhere(sql: str, params: list):
    """Another database session that holds what ``sql`` takes until it is closed (another worker)."""
    from django.db import connections

    other = connections.create_connection("default")
    other.set_autocommit(False)
    other.cursor().execute(sql, params)
    return other


def test_a_batch_whose_trace_another_batch_holds_is_left_pending_not_waited_for(project):
    from django.db import connection

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (advisory locks are its own)")
    request = factories.trace_request(spans=3)
    batch = pending_batch(project, request)
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    other = _held_elsewhere("SELECT pg_advisory_xact_lock(hashtextextended(%s, 14))", [trace_id])
    try:
        assert process_batch(batch.id, wait=False) == "busy"
        batch.refresh_from_db()
        stored = (Span.objects.count(), Call.objects.count())
        assert (batch.status, batch.attempts, stored) == ("pending", 0, (0, 0))
    finally:
        other.rollback()
        other.close()
    assert process_batch(batch.id, wait=False) == "done"
    batch.refresh_from_db()
    assert (batch.status, batch.attempts, Call.objects.count()) == ("done", 1, 3)


@pytest.mark.parametrize("alone", [False, True], ids=["a-trace-per-run", "a-trace-per-call"])
def test_a_batch_stored_in_parts_ends_where_one_part_ends(db, monkeypatch, alone):
    """A large batch is stored a part at a time (a worker's memory does not grow with the batch): runs
    interleaved, calls out of order, an agent span last (or each call alone in its trace, its run named
    by its conversation); the end state equals storing it whole."""
    from ingest import store
    from tests.ingest.test_concurrency import RUNS, end_state, shuffled_batches

    request = ExportTraceServiceRequest()
    for body in shuffled_batches(alone):
        request.MergeFrom(ExportTraceServiceRequest.FromString(body))
    whole, _ = factories.project_with_key("whole")
    in_parts, _ = factories.project_with_key("parts")
    assert process_batch(pending_batch(whole, request).id) == "done"
    sizes = [
        span.ByteSize()
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    parts = []
    real_parts = store.otlp.span_parts
    monkeypatch.setattr(store, "PART_BYTES", max(sizes) * 3)
    monkeypatch.setattr(
        store.otlp,
        "span_parts",
        lambda *args: [parts.append(len(part)) or part for part in real_parts(*args)],
    )
    assert process_batch(pending_batch(in_parts, request).id) == "done"
    assert len(parts) > 10 and sum(parts) == len(sizes)
    for run_id in Run.objects.values_list("id", flat=True):  # what the task enqueues once it commits
        analyse_run(run_id)
    expected = end_state(whole)
    assert len(expected) == RUNS and all(run["counts"][2] for run in expected.values())
    assert end_state(in_parts) == expected


def test_the_task_interprets_a_batch_then_waits_for_the_batch_holding_its_trace(project, monkeypatch):
    """Batches that share a trace are written in their order: the task waits (it no longer requeues the
    batch, which wrote a later batch first), but only once the batch's spans are interpreted."""
    import threading
    import time

    from django.db import connection

    from ingest import calls as calls_module

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (advisory locks are its own)")
    request = factories.trace_request(spans=3)
    batch = pending_batch(project, request)
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    other = _held_elsewhere("SELECT pg_advisory_xact_lock(hashtextextended(%s, 14))", [trace_id])
    interpreted = threading.Event()
    real_interpret = calls_module.interpret_spans

    def interpret(*args):
        found = real_interpret(*args)
        interpreted.set()
        return found

    monkeypatch.setattr(calls_module, "interpret_spans", interpret)
    other.inc_thread_sharing()  # the other session lets go from a thread of its own
    released = threading.Event()

    def release():
        interpreted.wait(30)
        time.sleep(0.3)  # while the task waits
        released.set()
        other.rollback()

    thread = threading.Thread(target=release)
    thread.start()
    try:
        assert process_batch_task(batch_id=batch.id) == "done"  # returns only once the other let go
    finally:
        thread.join()
        other.close()
    assert interpreted.is_set() and released.is_set()
    batch.refresh_from_db()
    assert (batch.status, batch.attempts, Call.objects.count()) == ("done", 1, 3)
