"""Numbering a run's calls again (ingest.numbering): it reads only NUMBERING_FIELDS, in queries that do
not grow with the run."""

import zlib

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.models import Call, RawBatch, Run
from ingest.numbering import number_calls
from ingest.store import process_batch
from tests.factories import chat_span, user_message


def stored_run(project, calls: int) -> Run:
    request = ExportTraceServiceRequest()
    for call in range(1, calls + 1):
        chat_span(
            request,
            trace_id=bytes([calls]) * 16,
            number=call,
            messages=[user_message(f"message {number}") for number in range(call)],
            attributes={"gen_ai.conversation.id": f"numbered-{calls}"},
        )
    data = request.SerializeToString()
    batch = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=zlib.compress(data),
        content_type="protobuf",
        wire_bytes=len(data),
        item_count=calls,
    )
    assert process_batch(batch.id) == "done"
    return Run.objects.get(key=f"numbered-{calls}")


def test_renumbering_a_run_reads_what_numbering_needs_in_queries_that_do_not_grow_with_its_calls(project):
    # A field numbering reads but NUMBERING_FIELDS left out (agent_entry, for handoffs) was loaded
    # call by call: a query per call on every renumbering.
    counts = {}
    for calls in (5, 40):
        run = stored_run(project, calls)
        before = list(run.calls.order_by("seq").values_list("seq", "turn"))
        Call.objects.filter(run=run).update(seq=None)
        with transaction.atomic(), CaptureQueriesContext(connection) as queries:
            number_calls(Run.objects.select_for_update().get(id=run.id), renumber=True)
        counts[calls] = len(queries)
        assert list(run.calls.order_by("seq").values_list("seq", "turn")) == before
    assert counts[40] == counts[5], counts
