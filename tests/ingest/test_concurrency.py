"""Several real workers at once: interleaved runs, calls out of order, the same batches twice.

Three worker processes on the real broker and PostgreSQL process the batches concurrently; the end
state must be the one a single in-process pass over the same spans, in order, gives.
"""

import random

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview.celery import app as celery_app
from ingest.models import Call, Finding, Project, RawBatch, Run
from ingest.tasks import process_batch_task
from tests import factories, services
from tests.factories import assistant_message, kv, user_message

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

RUNS = 6
CALLS = 14
SPANS_PER_BATCH = 5
START = 1_764_000_000_000_000_000
AGENT_SPAN = (999).to_bytes(8, "big")


def trace_id(run: int) -> bytes:
    return bytes([run + 1]) * 16


def call_trace_id(run: int, number: int) -> bytes:
    """A trace of its own for each call (an app with no span of its own: openai-v2 alone)."""
    return bytes([run + 1, number]) * 8


def tool_exchange(run: int, number: int) -> list[dict]:
    call_id = f"t{run}-{number}"
    return [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": call_id, "name": "grep", "arguments": {}}],
        },
        {
            "role": "user",
            "parts": [
                {"type": "tool_call_response", "id": call_id, "response": f"result {run}-{number} " * 40}
            ],
        },
    ]


def spans(alone: bool = False) -> list[tuple[int, int, dict]]:
    """(run, call number, chat_span keyword arguments) of every call, in order; ``alone``: each call the
    root of a trace of its own, its run named only by its conversation id."""
    found = []
    for run in range(RUNS):
        history = [user_message(f"Task {run}: find why service {run} is slow. " * 20)]
        for number in range(1, CALLS + 1):
            if number % 5 == 0:  # a new user turn
                history = history + [
                    assistant_message(f"Step {number} done."),
                    user_message(f"Next {number}?"),
                ]
            elif number > 1:  # a tool loop
                history = history + tool_exchange(run, number)
            # The system prompt changes once mid-run: the cached prefix breaks there.
            system = f"You are agent {run}." + (" Be brief." if number >= 9 else "") + " Rules. " * 300
            prompt = 2000 + 400 * number
            found.append(
                (
                    run,
                    number,
                    {
                        "trace_id": call_trace_id(run, number) if alone else trace_id(run),
                        "number": number,
                        "messages": list(history),
                        "start": START + number * 10**9 + run * 10**6,
                        # Run 0's calls belong to an agent invocation whose span arrives last.
                        "parent": AGENT_SPAN if run == 0 and not alone else b"",
                        "attributes": {
                            "gen_ai.conversation.id": f"concurrency-{run}",
                            "gen_ai.system_instructions": system,
                            "gen_ai.usage.input_tokens": prompt,
                            "gen_ai.usage.cache_read.input_tokens": 0 if number in (1, 9) else prompt - 500,
                            "gen_ai.usage.output_tokens": 50 + number,
                        },
                    },
                )
            )
    return found


def agent_span(request: ExportTraceServiceRequest) -> None:
    span = request.resource_spans[0].scope_spans[0].spans.add()
    span.trace_id, span.span_id, span.name, span.kind = trace_id(0), AGENT_SPAN, "invoke_agent triage", 1
    span.start_time_unix_nano = START
    span.end_time_unix_nano = START + (CALLS + 1) * 10**9
    span.attributes.extend([kv("gen_ai.operation.name", "invoke_agent"), kv("gen_ai.agent.name", "triage")])


def request_of(chosen: list[tuple[int, int, dict]]) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _run, _number, arguments in chosen:
        factories.chat_span(request, **arguments)
    return request


def shuffled_batches(alone: bool = False, seed: int = 8) -> list[bytes]:
    """Every span once in shuffled batches (runs interleaved, calls out of order), the agent span last."""
    chosen = spans(alone)
    random.Random(seed).shuffle(chosen)
    requests = [
        request_of(chosen[start : start + SPANS_PER_BATCH])
        for start in range(0, len(chosen), SPANS_PER_BATCH)
    ]
    if not alone:
        agent_span(requests[-1])
    return [request.SerializeToString() for request in requests]


def ordered_batches(alone: bool) -> list[bytes]:
    """The same spans, each run's calls in order, one run after the other, the agent span first."""
    requests = []
    for run in range(RUNS):
        request = request_of([entry for entry in spans(alone) if entry[0] == run])
        if run == 0 and not alone:
            agent_span(request)
        requests.append(request.SerializeToString())
    return requests


def post(client, key: str, body: bytes) -> None:
    response = client.post(
        "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content


@pytest.fixture(scope="module")
def three_workers(service_env):
    celery_app.control.purge()  # messages left by an earlier, interrupted run
    workers = [services.start_worker(service_env, name=f"concurrency-{number}") for number in range(3)]
    for worker in workers:  # the logs are appended to: remember where this session's part starts
        worker.log_start = worker.log_path.stat().st_size
    yield workers
    for worker in workers:
        worker.stop()


def end_state(project: Project) -> dict:
    """Everything the pipeline derives, keyed by what does not depend on the order of arrival."""
    runs = {}
    for run in Run.objects.filter(project=project).order_by("key"):
        calls = list(
            Call.objects.filter(run=run).order_by("seq").values_list("span_id", "seq", "turn", "analysis")
        )
        findings = sorted(
            Finding.objects.filter(run=run).values_list("call_seq", "type", "severity", "item_id", "cause"),
            key=repr,
        )
        runs[run.key] = {
            "calls": calls,
            "findings": findings,
            "counts": (run.call_count, run.turn_count, run.analysed_seq),
            "usage": run.usage_dict(),
            "models": run.model_names,
            "accounting": run.accounting,
            "title": run.title,
        }
    return runs


@pytest.mark.parametrize("alone", [False, True], ids=["a-trace-per-run", "a-trace-per-call"])
def test_three_workers_end_where_one_ordered_pass_ends(three_workers, client, alone):
    concurrent, concurrent_key = factories.project_with_key("concurrent")
    reference, reference_key = factories.project_with_key("reference")
    batches = shuffled_batches(alone)

    # Everything to the broker at once; a third of the batches is sent twice (an exporter retrying).
    for body in batches + batches[::3]:
        post(client, concurrent_key, body)
    # And some batches are delivered twice by the broker too (a lost ack).
    for batch_id in RawBatch.objects.filter(project=concurrent).values_list("id", flat=True)[::4]:
        process_batch_task.apply_async(kwargs={"batch_id": batch_id})

    def finished() -> bool:
        pending = RawBatch.objects.filter(project=concurrent).exclude(status=RawBatch.Status.DONE).exists()
        runs = Run.objects.filter(project=concurrent)
        analysed = runs.count() == RUNS and all(
            run.call_count == CALLS and run.analysed_seq == CALLS for run in runs
        )
        return not pending and analysed and services.workers_idle()

    services.wait_for(finished, 180, "the workers to process and analyse every run", interval=0.5)
    logs = [worker.log_path.read_text(errors="replace")[worker.log_start :] for worker in three_workers]
    assert not [log for log in logs if "Traceback" in log], logs
    # Each worker took its share: the batches really were processed concurrently.
    assert all("process_batch_task" in log for log in logs)

    # No duplicate and no lost calls: every span is one call, numbered 1..CALLS in its run.
    assert Call.objects.filter(project=concurrent).count() == RUNS * CALLS
    for run in Run.objects.filter(project=concurrent):
        assert sorted(run.calls.values_list("seq", flat=True)) == list(range(1, CALLS + 1))
    assert Finding.objects.filter(project=concurrent, type="cache_invalidated", call_seq=9).count() == RUNS

    # The reference: one process, every batch once, in order.
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        for body in ordered_batches(alone):
            post(client, reference_key, body)
    finally:
        celery_app.conf.task_always_eager = previous

    expected, actual = end_state(reference), end_state(concurrent)
    assert list(actual) == list(expected) == [f"concurrency-{run}" for run in range(RUNS)]
    assert all(
        state["title"].startswith(f"Task {run}: find why") for run, state in enumerate(actual.values())
    )
    for key, state in expected.items():
        assert actual[key] == state, key
