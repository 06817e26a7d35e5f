"""Numbering a run's calls again (ingest.numbering): it reads only NUMBERING_FIELDS, in queries that do
not grow with the run."""

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from ingest.models import Call, Run
from ingest.numbering import number_calls
from tests import factories


def stored_run(project, calls: int) -> Run:
    factories.processed(project, factories.conversation_request(calls, f"numbered-{calls}"))
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
