"""The analyses run over stored calls: incrementally, order-proof, and safe to run twice."""

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.analyse import analyse_run, unpack
from ingest.models import AnalysisCheckpoint, Call, Finding, Run
from tests import factories
from tests.factories import assistant_message, user_message
from tests.ingest.test_calls import TRACE, send  # noqa: F401  (the fixture)

SYSTEM = "You are the payments on-call assistant. " + "Follow the runbook and keep answers short. " * 200


def call_requests(count: int) -> list[ExportTraceServiceRequest]:
    """A growing conversation; call 5's system prompt carries a timestamp, a classic cache breaker."""
    requests = []
    history = [user_message("Is pay-shard-7 healthy?")]
    for number in range(1, count + 1):
        system = SYSTEM if number != 5 else f"Now: 2026-11-24T10:0{number}:00Z. " + SYSTEM
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=[{"role": "system", "parts": [{"type": "text", "content": system}]}, *history],
            attributes={
                "gen_ai.conversation.id": "conv-a",
                "gen_ai.usage.input_tokens": 2000 + 100 * number,
                "gen_ai.usage.cache_read.input_tokens": 1800 if number > 1 else 0,
                "gen_ai.usage.cache_creation.input_tokens": 100,
                "gen_ai.usage.output_tokens": 20,
            },
        )
        requests.append(request)
        history = [*history, assistant_message(f"answer {number}"), user_message(f"question {number + 1}")]
    return requests


def analysis_state():
    calls = [
        (call.seq, call.analysis["cache"]["cause"], call.analysis["cache"]["invalidator_item_id"])
        for call in Call.objects.order_by("seq")
    ]
    findings = sorted(Finding.objects.values_list("call_seq", "type", "item_id", "cause"), key=str)
    return calls, findings


def test_every_call_is_analysed_and_the_break_is_found_at_its_call(send, project):  # noqa: F811
    for request in call_requests(8):
        send(request)
    run = Run.objects.get()
    assert run.analysed_seq == 8
    causes = {seq: cause for seq, cause, _ in analysis_state()[0] if cause}
    assert causes[5] in ("system_changed", "volatile_system_prompt")
    assert set(causes) <= {5, 6}  # the break, and the return to the old prompt right after it
    assert Finding.objects.filter(type="cache_invalidated", call_seq=5).exists()
    assert run.accounting["calls"] == 8


def test_the_result_does_not_depend_on_the_arrival_order(send, project):  # noqa: F811
    states = []
    for order in (range(8), reversed(range(8)), [3, 0, 7, 1, 6, 2, 5, 4]):
        Run.objects.all().delete()
        requests = call_requests(8)
        for index in order:
            send(requests[index])
        states.append(analysis_state())
    assert states[0] == states[1] == states[2]


def test_analysing_twice_changes_nothing(send, project):  # noqa: F811
    for request in call_requests(6):
        send(request)
    run = Run.objects.get()
    before = analysis_state()
    assert analyse_run(run.id) == 0
    assert analysis_state() == before


def test_a_late_call_restarts_from_a_checkpoint(send, project, monkeypatch):  # noqa: F811
    monkeypatch.setattr("ingest.analyse.CHECKPOINT_EVERY", 2)
    requests = call_requests(9)
    for index in [0, 1, 2, 3, 4, 5, 7, 8]:
        send(requests[index])
    run = Run.objects.get()
    assert run.analysed_seq == 8
    assert sorted(AnalysisCheckpoint.objects.values_list("seq", flat=True)) == [2, 4, 6, 8]
    send(requests[6])  # call 7 arrives last: calls 7-9 are renumbered and analysed again
    run.refresh_from_db()
    assert run.analysed_seq == 9
    assert sorted(AnalysisCheckpoint.objects.values_list("seq", flat=True)) == [2, 4, 6, 8]
    late = analysis_state()
    Run.objects.all().delete()
    for request in call_requests(9):
        send(request)
    assert analysis_state() == late


@pytest.mark.parametrize("missing", ["analysis_state", "checkpoints"])
def test_analysis_recovers_when_its_state_is_gone(send, project, missing):  # noqa: F811
    for request in call_requests(5):
        send(request)
    run = Run.objects.get()
    expected = analysis_state()
    if missing == "analysis_state":
        Run.objects.filter(id=run.id).update(analysis_state=None, analysed_seq=0)
    else:
        AnalysisCheckpoint.objects.all().delete()
        Run.objects.filter(id=run.id).update(analysis_state=None, analysed_seq=3)
    Finding.objects.all().delete()
    analyse_run(run.id)
    assert analysis_state() == expected


def full_analysis(run: Run) -> dict:
    run.refresh_from_db()
    return {
        "calls": list(Call.objects.filter(run=run).order_by("seq").values_list("seq", "analysis")),
        "findings": sorted(
            Finding.objects.filter(run=run).values_list(
                "call_seq", "type", "item_id", "cause", "evidence", "fix"
            ),
            key=str,
        ),
        "checkpoints": sorted(
            (seq, unpack(state)) for seq, state in AnalysisCheckpoint.objects.values_list("seq", "state")
        ),
        "state": unpack(run.analysis_state),
        "accounting": run.accounting,
        "analysed_seq": run.analysed_seq,
    }


def test_calls_appended_by_a_batch_are_analysed_in_it_as_the_task_would(send, project, monkeypatch):  # noqa: F811
    """Several calls per request (two chunks, a checkpoint): analysed while the batch stores them, with
    no analysis task; the result equals the task's, run from the first call."""
    enqueued = []
    monkeypatch.setattr("ingest.tasks.enqueue_analysis", enqueued.append)
    monkeypatch.setattr("ingest.analyse.CHUNK", 7)
    requests = call_requests(40)
    for part in (requests[:3], requests[3:33], requests[33:]):
        merged = ExportTraceServiceRequest()
        for request in part:
            merged.MergeFrom(request)
        send(merged)
    assert enqueued == []
    run = Run.objects.get()
    inline = full_analysis(run)
    assert inline["analysed_seq"] == 40 and all(analysis for _, analysis in inline["calls"])
    assert [seq for seq, _ in inline["checkpoints"]] == [32]
    assert any(finding[1] == "cache_invalidated" for finding in inline["findings"])

    Finding.objects.all().delete()
    AnalysisCheckpoint.objects.all().delete()
    Call.objects.update(analysis=None)
    Run.objects.filter(id=run.id).update(analysis_state=None, analysed_seq=0, accounting=None)
    assert analyse_run(run.id) == 40
    assert full_analysis(run) == inline


def test_a_run_whose_analysis_lags_is_left_to_the_task(send, project, monkeypatch):  # noqa: F811
    enqueued = []
    monkeypatch.setattr("ingest.tasks.enqueue_analysis", enqueued.append)
    requests = call_requests(4)
    send(requests[0])
    run = Run.objects.get()
    Run.objects.filter(id=run.id).update(analysed_seq=0, analysis_state=None)  # as if its task were lost
    send(requests[1])
    assert enqueued == [run.id]
    run.refresh_from_db()
    assert (run.call_count, run.analysed_seq) == (2, 0)
    analyse_run(run.id)
    run.refresh_from_db()
    assert run.analysed_seq == 2


def handoff_requests() -> list[ExportTraceServiceRequest]:
    """A triage agent hands off to a billing agent in the same conversation: each its own prompt."""
    requests = []
    history = [user_message("I was charged twice.")]
    for number, agent in enumerate(["triage", "triage", "billing", "billing"], start=1):
        system = f"You are the {agent} agent. " + "Follow the runbook and keep answers short. " * 200
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=[{"role": "system", "parts": [{"type": "text", "content": system}]}, *history],
            attributes={
                "gen_ai.conversation.id": "conv-handoff",
                "gen_ai.agent.name": agent,
                "gen_ai.usage.input_tokens": 2000 + 100 * number,
                "gen_ai.usage.cache_read.input_tokens": 1800 if number in (2, 4) else 0,
                "gen_ai.usage.cache_creation.input_tokens": 100 if number in (2, 4) else 1900,
                "gen_ai.usage.output_tokens": 20,
            },
        )
        requests.append(request)
        history = [*history, assistant_message(f"answer {number}"), user_message(f"question {number + 1}")]
    return requests


def test_a_handoff_between_agents_is_not_a_cache_break(send, project):  # noqa: F811
    for request in handoff_requests():
        send(request)
    run = Run.objects.get()
    calls = {call.seq: call for call in Call.objects.filter(run=run)}

    assert run.analysed_seq == 4
    assert [calls[seq].agent_name for seq in (1, 2, 3, 4)] == ["triage", "triage", "billing", "billing"]
    assert [calls[seq].analysis["cache"]["cause"] for seq in (1, 2, 3, 4)] == [None] * 4
    assert calls[3].analysis["cache"]["reference_seq"] is None  # billing's first call: nothing of its own
    assert calls[4].analysis["cache"]["reference_seq"] == 3
    assert not Finding.objects.filter(
        run=run, type__in=["cache_invalidated", "invisible_invalidator"]
    ).exists()


def agent_conversation(traces: int = 3, calls: int = 6) -> list[list]:
    """Spans of a conversation over ``traces`` traces, in the order an exporter ends them: each trace's
    calls, then its agent span. The system prompt changes in the second trace (a cache break)."""
    spans = []
    history = [user_message("Is pay-shard-7 healthy?")]
    for trace in range(traces):
        trace_id = bytes([trace + 1]) * 16
        root = (1000 + trace).to_bytes(8, "big")
        system = SYSTEM if trace != 1 else "Now: 2026-12-02T07:00:00Z. " + SYSTEM
        first = 1_700_000_000_000_000_000 + trace * 100 * 1_000_000_000
        for position in range(calls):
            number = trace * calls + position + 1
            request = ExportTraceServiceRequest()
            factories.chat_span(
                request,
                trace_id=trace_id,
                number=number,
                parent=root,
                start=first + (position + 1) * 1_000_000_000,
                messages=[{"role": "system", "parts": [{"type": "text", "content": system}]}, *history],
                attributes={
                    "gen_ai.conversation.id": "conv-agents",
                    "gen_ai.usage.input_tokens": 2000 + 100 * number,
                    "gen_ai.usage.cache_read.input_tokens": 1800 if position else 0,
                    "gen_ai.usage.output_tokens": 20,
                },
            )
            spans.append(request.resource_spans[0].scope_spans[0].spans[0])
            history = [*history, assistant_message(f"answer {number}"), user_message(f"question {number}")]
        agent = ExportTraceServiceRequest().resource_spans.add().scope_spans.add().spans.add()
        agent.trace_id, agent.span_id, agent.name = trace_id, root, "invoke_agent support"
        agent.start_time_unix_nano, agent.end_time_unix_nano = first, first + 50 * 1_000_000_000
        agent.attributes.extend(
            [
                factories.kv("gen_ai.operation.name", "invoke_agent"),
                factories.kv("gen_ai.agent.name", "support"),
                factories.kv("gen_ai.conversation.id", "conv-agents"),
            ]
        )
        spans.append(agent)
    return spans


def batches_of(spans: list, cuts: list[int]) -> list[ExportTraceServiceRequest]:
    requests = []
    for start, end in zip([0, *cuts], [*cuts, len(spans)], strict=True):
        request = factories.trace_request(spans=0)
        request.resource_spans[0].scope_spans[0].spans.extend(spans[start:end])
        requests.append(request)
    return requests


def project_state(project) -> dict:
    run = Run.objects.get(project=project)
    return {
        "calls": list(
            Call.objects.filter(run=run)
            .order_by("seq")
            .values_list("span_id", "seq", "turn", "agent_name", "analysis", "window_total")
        ),
        "findings": sorted(
            Finding.objects.filter(run=run).values_list("call_seq", "type", "severity", "item_id", "cause"),
            key=repr,
        ),
        "run": (run.call_count, run.turn_count, run.analysed_seq, run.agent_name, run.accounting),
    }


@pytest.mark.django_db
def test_agent_spans_arriving_a_batch_after_their_calls_leave_what_an_in_order_pass_leaves(send_as):
    spans = agent_conversation()  # 3 traces of 6 calls and an agent span: 21 spans
    orders = {
        "one batch per trace": [7, 14],
        # Each trace's agent span comes in the batch after its first calls, with more calls.
        "traces split across batches": [4, 10, 17],
        "one span per batch": list(range(1, len(spans))),
    }
    states = {}
    for name, cuts in orders.items():
        project, key = factories.project_with_key(name.replace(" ", "-"))
        for request in batches_of(spans, cuts):
            send_as(key, request)
        states[name] = project_state(project)
    reference = states.pop("one batch per trace")
    assert [agent for _, _, _, agent, _, _ in reference["calls"]] == ["support"] * 18
    assert any(finding[1] == "cache_invalidated" for finding in reference["findings"])
    for name, state in states.items():
        assert state == reference, name


def test_a_call_a_batch_derived_is_read_as_its_stored_items_would_be_read():
    """The analysis of calls a batch appends reads the Item records they were derived from; what it
    reads must be what the stored dicts give back (their content aside: no analysis reads it), for
    every kind of item, a duplicated message included."""
    import json

    from ctxcore.vocabulary import evolve
    from ingest import normalise
    from ingest.analyse import call_input
    from ingest.call_rows import Batch, new_call
    from tests.ingest.test_normalise import OTEL_MESSAGES, TOOLS, fixed_tokens, span

    messages = [*OTEL_MESSAGES, OTEL_MESSAGES[1]]  # the same user message twice: "msg:…#2"
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.tool.definitions": json.dumps(TOOLS),
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be kind."}]),
        "gen_ai.input.messages": json.dumps(messages),
        "gen_ai.usage.input_tokens": 120,
    }
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert record.manifest_source == "derived" and {item.kind for item in record.items} >= {
        "tool", "system", "message", "tool_result"}  # fmt: skip
    call = new_call(Batch(project_id=1), None, record)
    call.seq = 1
    assert call.made_items is record.items
    made = call_input(call)
    stored = call.items
    call.items = stored  # set again: the dicts, as a call read back from the database holds them
    assert call.made_items is None
    read = call_input(call)
    assert made.items != read.items  # the made items still hold their content
    assert [evolve(item, content=None, content_truncated=False) for item in made.items] == list(read.items)
    assert evolve(made, items=read.items) == read
