"""Importing a run export through the write side: stored in the request, analysed by a task on commit."""

import json

import pytest
from django.db import transaction
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview import exchange
from ingest import imports
from ingest.models import Call, Finding, Run
from ingest.tasks import analyse_run_task
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import TRACE, send  # noqa: F401  (the fixture)


@pytest.fixture
def source(send, project):  # noqa: F811
    for number in (1, 2, 3):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=[user_message(f"question {n}") for n in range(1, number + 1)],
            attributes={
                "gen_ai.conversation.id": "imported",
                "gen_ai.usage.input_tokens": 100 * number,
                "gen_ai.usage.cache_read.input_tokens": 0,
                "gen_ai.usage.cache_creation.input_tokens": 0,
                "gen_ai.usage.output_tokens": 10,
            },
        )
        send(request)
    run = Run.objects.get(project=project)
    assert run.analysed_seq == run.call_count == 3
    return run


def state(run: Run) -> tuple:
    run.refresh_from_db()
    findings = sorted(
        Finding.objects.filter(run=run).values_list("call_seq", "type", "item_id", "cause"), key=str
    )
    return run.analysed_seq, run.accounting, findings


def test_an_import_stores_the_calls_and_leaves_the_analysis_to_a_task_enqueued_on_commit(
    source, alice, django_capture_on_commit_callbacks
):
    target_project, _ = factories.project_with_key("gamma", owner=alice)
    document = exchange.export_run(source)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with transaction.atomic():
            run, calls = imports.store_run(target_project, document)
    # Stored in the request, not analysed there.
    assert [call.seq for call in Call.objects.filter(run=run).order_by("seq")] == [1, 2, 3]
    assert (run.call_count, run.usage_dict()) == (source.call_count, source.usage_dict())
    assert state(run) == (0, None, [])
    assert len(callbacks) == 1
    callbacks[0]()  # enqueue_analysis: the task runs in-process (no broker in this test)
    analysed = state(run)
    assert analysed == (3, *state(source)[1:])
    # Delivered again (a redelivery after a lost worker): the same end state, no duplicate findings.
    analyse_run_task.apply(kwargs={"run_id": run.id}).get(disable_sync_subtasks=False)
    assert state(run) == analysed


def test_a_malformed_import_rolls_back_and_enqueues_nothing(
    source, alice, django_capture_on_commit_callbacks
):
    target_project, _ = factories.project_with_key("gamma", owner=alice)
    document = exchange.export_run(source)
    document["labels"] = [{"name": "x", "link": "javascript:alert(1)"}]  # refused after the calls are stored
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        with pytest.raises(imports.ImportError_, match="labels"):
            exchange.import_run(target_project, document)
    assert not Run.objects.filter(project=target_project).exists()
    assert callbacks == []


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_analyses_an_imported_run(worker, live_server, client, key):
    from tests import otel, services
    from tests.ingest.test_worker import all_done, export

    assert export(live_server.url, key, otel.agent_spans(calls=4)).name == "SUCCESS"
    services.wait_for(all_done(1), 30, "the worker to analyse the exported run")
    source = Run.objects.get()
    document = client.get(f"/api/v1/runs/{source.id}/export", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    _, target_key = factories.project_with_key("gamma")
    response = client.post(
        "/api/v1/projects/gamma/import",
        json.dumps(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {target_key}",
    )
    assert response.status_code == 201, response.content
    imported = Run.objects.get(id=response.json()["run"])
    services.wait_for(
        lambda: state(imported)[0] == imported.call_count, 30, "the worker to analyse the imported run"
    )
    assert state(imported)[1:] == state(source)[1:]


def test_an_imported_run_has_its_title_made_again_from_its_first_call(source, alice):
    target_project, _ = factories.project_with_key("gamma", owner=alice)
    with transaction.atomic():
        run, _ = imports.store_run(target_project, exchange.export_run(source))
    assert run.title == source.title == "question 1"
    assert "title" not in exchange.export_run(source)["run"]
