"""A run whose stored analysis state is from an earlier STATE_SCHEMA (an upgrade of ctxview): the next
call that arrives has the run analysed again from its first call, with the same answers a fresh run
gets (tests/ctxcore/analysis/test_state_schema.py guards that the schema is bumped)."""

from ctxcore.analysis import STATE_SCHEMA
from ingest.analyse import pack, unpack
from ingest.models import AnalysisCheckpoint, Run
from tests.ingest.test_analyse import analysis_state, call_requests
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)


def test_a_state_from_an_earlier_schema_is_analysed_again_from_the_first_call(send, project):  # noqa: F811
    requests = call_requests(7)
    for request in requests[:6]:
        send(request)
    run = Run.objects.get()
    older = {**unpack(run.analysis_state), "schema": STATE_SCHEMA - 1}
    Run.objects.filter(id=run.id).update(analysis_state=pack(older))
    AnalysisCheckpoint.objects.update(state=pack(older))  # any checkpoint as old
    send(requests[6])
    run.refresh_from_db()
    assert run.analysed_seq == 7 and unpack(run.analysis_state)["schema"] == STATE_SCHEMA
    outdated = analysis_state()

    Run.objects.all().delete()
    for request in requests:
        send(request)
    assert analysis_state() == outdated
