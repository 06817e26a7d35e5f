"""From spans to runs, turns and calls through the receiver and the batch task."""

import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ingest import contents
from ingest.models import Call, Content, Operation, RawBatch, Run, Span
from tests import factories, services
from tests.factories import assistant_message, user_message

TRACE = bytes(range(1, 17))


@pytest.fixture
def send(client, key, django_capture_on_commit_callbacks):
    def send(request, path="/v1/traces"):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                path,
                request.SerializeToString(),
                content_type="application/x-protobuf",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
        assert response.status_code == 200, response.content
        return response

    return send


def conversation_requests() -> list[ExportTraceServiceRequest]:
    """Five calls of one conversation, one request each: turn 1 has a tool loop, turns 2 and 3 do not."""
    history = [user_message("Is pay-shard-7 healthy?")]
    tool_use = {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "t1", "name": "query", "arguments": {}}],
    }
    tool_result = {
        "role": "user",
        "parts": [{"type": "tool_call_response", "id": "t1", "response": "p99 4s"}],
    }
    inputs = [
        history,
        history + [tool_use, tool_result],
        history + [tool_use, tool_result, assistant_message("It is slow."), user_message("Why?")],
        history
        + [
            tool_use,
            tool_result,
            assistant_message("It is slow."),
            user_message("Why?"),
            assistant_message("GC."),
            user_message("Fix it."),
        ],
        history
        + [
            tool_use,
            tool_result,
            assistant_message("It is slow."),
            user_message("Why?"),
            assistant_message("GC."),
            user_message("Fix it."),
            assistant_message("Done?"),
        ],
    ]
    requests = []
    for number, messages in enumerate(inputs, start=1):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=messages,
            attributes={
                "gen_ai.conversation.id": "conv-1",
                "gen_ai.usage.input_tokens": 1000 * number,
                "gen_ai.usage.cache_read.input_tokens": 500 * number,
                "gen_ai.usage.cache_creation.input_tokens": 100,
                "gen_ai.usage.output_tokens": 10,
            },
        )
        requests.append(request)
    return requests


def calls_state():
    return list(Call.objects.order_by("seq").values_list("span_id", "seq", "turn"))


def test_a_conversation_becomes_one_run_with_ordered_calls_and_turns(send, project):
    for request in conversation_requests():
        send(request)
    run = Run.objects.get()
    assert (run.key, run.key_source, run.call_count, run.turn_count) == (
        "conv-1",
        "gen_ai.conversation.id",
        5,
        3,
    )
    assert [(seq, turn) for _, seq, turn in calls_state()] == [(1, 1), (2, 1), (3, 2), (4, 3), (5, 3)]
    assert run.prompt_total == 15_000
    assert run.cache_read == 7_500
    assert run.uncached == 15_000 - 7_500 - 500
    assert run.usage_unknown == {"reasoning": 5}
    assert run.model_names == ["m1"]


def test_arrival_order_does_not_change_order_or_turns(send, project):
    expected = None
    for order in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 0, 4, 1, 3]):
        Call.objects.all().delete()
        Run.objects.all().delete()
        Span.objects.all().delete()
        requests = conversation_requests()
        for index in order:
            send(requests[index])
        state = calls_state()
        expected = expected or state
        assert state == expected
        assert Run.objects.get().turn_count == 3


def test_one_batch_with_every_call_in_reverse(send, project):
    request = ExportTraceServiceRequest()
    for single in reversed(conversation_requests()):
        request.resource_spans.extend(single.resource_spans)
    send(request)
    assert [(seq, turn) for _, seq, turn in calls_state()] == [(1, 1), (2, 1), (3, 2), (4, 3), (5, 3)]


def test_the_same_batch_twice_makes_no_duplicate_calls_or_totals(send, project):
    requests = conversation_requests()
    for request in requests + requests:
        send(request)
    assert Call.objects.count() == 5
    assert Run.objects.get().prompt_total == 15_000


def test_history_is_stored_once_and_span_rows_lose_the_copied_content(send, project):
    for request in conversation_requests():
        send(request)
    # The question, the tool use, the tool result, "Why?", "Fix it." and three answers.
    distinct_messages = 8
    hashes = {item["hash"] for call in Call.objects.all() for item in call.items}
    assert Content.objects.filter(project=project).count() == len(hashes)
    assert len(hashes) == distinct_messages
    span = Span.objects.get(span_id=(5).to_bytes(8, "big").hex())
    assert "gen_ai.input.messages" not in span.attributes
    assert span.attributes["ctxview.content_moved"] == ["gen_ai.input.messages"]


def test_a_batch_of_new_texts_looks_them_up_in_the_stored_contents_once(send, project, monkeypatch):
    # Counting the tokens looks up the texts this process has not counted; storing them then asks
    # again only about the texts that lookup did not cover.
    monkeypatch.setattr(contents, "_token_cache", {})
    with CaptureQueriesContext(connection) as queries:
        send(conversation_requests()[0])
    lookups = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith("SELECT") and "ingest_content" in query["sql"]
    ]
    assert len(lookups) == 1, lookups
    assert Content.objects.filter(project=project).count() > 0


def test_a_late_agent_span_renumbers_the_turns_of_its_calls(send, project):
    agent_a, agent_b = (9001).to_bytes(8, "big"), (9002).to_bytes(8, "big")
    request = ExportTraceServiceRequest()
    for number, parent in ((1, agent_a), (2, agent_a), (3, agent_b)):
        factories.chat_span(request, trace_id=TRACE, number=number, parent=parent)  # no content captured
    send(request)
    assert [turn for _, _, turn in calls_state()] == [1, 1, 1]  # one trace, nothing else known yet

    agents = factories.trace_request(spans=0, trace_id=TRACE)
    scope = agents.resource_spans[0].scope_spans[0]
    for span_id, start in ((agent_a, 1_700_000_000_000_000_000), (agent_b, 1_700_000_002_500_000_000)):
        span = scope.spans.add(trace_id=TRACE, span_id=span_id, name="invoke_agent support")
        span.start_time_unix_nano, span.end_time_unix_nano = start, start + 10
        span.attributes.append(factories.kv("gen_ai.operation.name", "invoke_agent"))
    send(agents)
    assert Operation.objects.filter(kind="agent").count() == 2
    assert [turn for _, _, turn in calls_state()] == [1, 1, 2]
    assert Run.objects.get().turn_count == 2


def test_content_in_log_events_is_joined_whichever_arrives_first(send, project):
    from tests.factories import logs_request

    def details_event(span_number, text):
        request = logs_request(records=1, trace_id=TRACE)
        record = request.resource_logs[0].scope_logs[0].log_records[0]
        record.span_id = span_number.to_bytes(8, "big")
        record.ClearField("body")
        messages = (
            record.attributes.add(key="gen_ai.input.messages").value.array_value.values.add().kvlist_value
        )
        messages.values.add(key="role").value.string_value = "user"
        part = messages.values.add(key="parts").value.array_value.values.add().kvlist_value
        part.values.add(key="type").value.string_value = "text"
        part.values.add(key="content").value.string_value = text
        return request

    send(details_event(1, "first question"), path="/v1/logs")  # the event before its span
    request = ExportTraceServiceRequest()
    factories.chat_span(request, trace_id=TRACE, number=1)
    factories.chat_span(request, trace_id=TRACE, number=2)
    send(request)
    send(details_event(2, "second question"), path="/v1/logs")  # the event after its span

    calls = list(Call.objects.order_by("seq"))
    assert [call.content_captured for call in calls] == [True, True]
    assert [len(call.items) for call in calls] == [1, 1]
    assert [call.turn for call in calls] == [1, 2]
    assert Content.objects.get(hash=calls[1].items[0]["hash"]).text == (
        '{"role":"user","parts":[{"type":"text","content":"second question"}]}'
    )


@pytest.mark.parametrize("outer_first", [True, False], ids=["outer-first", "inner-first"])
def test_two_spans_of_one_request_make_one_call_whichever_arrives_first(send, project, outer_first):
    """The Anthropic SDK traces itself under an instrumentation's span: one request, two spans."""
    usage = {"gen_ai.usage.input_tokens": 900, "gen_ai.usage.output_tokens": 12}
    outer, inner = ExportTraceServiceRequest(), ExportTraceServiceRequest()
    factories.chat_span(outer, trace_id=TRACE, number=1, messages=[user_message("hi")], attributes=usage)
    factories.chat_span(
        inner,
        trace_id=TRACE,
        number=2,
        parent=(1).to_bytes(8, "big"),
        attributes={**usage, "gen_ai.response.id": "msg_1"},
    )
    for request in (outer, inner) if outer_first else (inner, outer):
        send(request)
    call = Call.objects.get()
    assert call.span_id == (1).to_bytes(8, "big").hex()  # the one with content, the outer one
    assert (call.seq, call.turn, call.prompt_total) == (1, 1, 900)
    run = Run.objects.get()
    assert (run.call_count, run.prompt_total, run.output) == (1, 900, 12)


def test_sibling_spans_with_the_same_response_id_make_one_call(send, project):
    request = ExportTraceServiceRequest()
    parent = (77).to_bytes(8, "big")
    for number in (1, 2):
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            parent=parent,
            attributes={"gen_ai.response.id": "msg_1", "gen_ai.usage.input_tokens": 5},
        )
    send(request)
    call = Call.objects.get()
    assert call.span_id == (1).to_bytes(8, "big").hex()  # the earlier one when nothing else decides
    assert "1 other span(s) of the same request ignored" in call.notes[-1]


# --- Parallel calls against the live server, with a real worker (issue 18) -----------------------


def agent_with_parallel_calls(calls: list[dict]):
    """An agent span with one chat span per entry of ``calls`` under it, all running at once, made and
    exported by the OpenTelemetry SDK. Each entry: attributes of its chat span (scope, name optional)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "parallel-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    agent_tracer = provider.get_tracer("agent.framework", "1.0")
    start = time.time_ns()
    with agent_tracer.start_as_current_span(
        "invoke_agent fan-out", start_time=start, attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        spans = [
            provider.get_tracer(call.pop("scope", "agent.framework")).start_span(
                call.pop("name", "chat claude"), start_time=start + 1_000 + index, attributes=call
            )
            for index, call in enumerate(calls)
        ]
        for index, span in enumerate(spans):
            span.end(end_time=start + 50_000_000 + index)
    provider.shutdown()
    return memory.get_finished_spans()


def chat_attributes(question: str | None, response_id: str | None) -> dict:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.usage.input_tokens": 1200,  # the same figures: the same prompt template, other documents
        "gen_ai.usage.output_tokens": 80,
    }
    if question is not None:
        attributes["gen_ai.input.messages"] = json.dumps([user_message(question)])
    if response_id is not None:
        attributes["gen_ai.response.id"] = response_id
    return attributes


def export_and_wait(url: str, key: str, spans) -> None:
    exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {key}"})
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()

    def done():
        statuses = set(RawBatch.objects.values_list("status", flat=True))
        return statuses == {"done"} and all(run.analysed_seq == run.call_count for run in Run.objects.all())

    services.wait_for(done, 30, "the worker to process the batch")


def live(test):
    """A test against the live server, whose batches a real worker process processes."""
    return pytest.mark.usefixtures("worker")(
        pytest.mark.services(pytest.mark.django_db(transaction=True)(test))
    )


@pytest.mark.parametrize(
    "response_ids",
    [["msg_a", "msg_b", "msg_c"], [None, None, None]],
    ids=["distinct-response-ids", "no-response-ids"],
)
@live
def test_parallel_calls_with_the_same_usage_stay_separate_calls(live_server, key, response_ids):
    questions = ["Summarise doc-1.md", "Summarise doc-2.md", "Summarise doc-3.md"]
    spans = agent_with_parallel_calls(
        [
            chat_attributes(question, response_id)
            for question, response_id in zip(questions, response_ids, strict=True)
        ]
    )
    export_and_wait(live_server.url, key, spans)
    calls = list(Call.objects.order_by("seq"))
    # Before: one call, "2 other span(s) of the same request ignored".
    assert len(calls) == 3
    assert not any("of the same request ignored" in note for call in calls for note in call.notes)
    assert Run.objects.get().call_count == 3


@live
def test_distinct_response_ids_are_never_one_request_even_through_a_span_without_one(live_server, key):
    # An instrumentation span with no response id beside two SDK spans: it may join one, not both.
    spans = agent_with_parallel_calls(
        [
            chat_attributes(None, "msg_a"),
            chat_attributes(None, "msg_b"),
            {
                **chat_attributes("Summarise doc-1.md", None),
                "scope": "openinference.instrumentation.anthropic",
            },
        ]
    )
    export_and_wait(live_server.url, key, spans)
    assert sorted(Call.objects.values_list("response_id", flat=True)) == ["", "msg_b"]


@live
def test_an_instrumentation_span_and_the_sdk_span_of_one_request_still_make_one_call(live_server, key):
    # As openinference-anthropic-sdktrace exports a streamed request: siblings, the instrumentation's with
    # the content and no response id, the SDK's with the response id and no content; same usage.
    spans = agent_with_parallel_calls(
        [
            {
                **chat_attributes("What is the weather?", None),
                "scope": "openinference.instrumentation.anthropic",
                "name": "messages.stream",
            },
            {
                **chat_attributes(None, "msg_1"),
                "scope": "com.anthropic.sdk.python",
                "name": "anthropic.messages.create",
            },
        ]
    )
    export_and_wait(live_server.url, key, spans)
    call = Call.objects.get()
    assert (call.name, call.content_captured) == ("messages.stream", True)
    assert "1 other span(s) of the same request ignored" in call.notes[-1]
