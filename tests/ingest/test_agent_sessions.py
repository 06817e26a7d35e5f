"""Agents and sessions resolved as spans arrive (ingest.agent_sessions), through the receiver and the
batch task."""

import re

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest import agent_sessions
from ingest.models import Call, Finding, Resource, Run, Span
from tests import factories, services
from tests.factories import kv, user_message
from tests.ingest.test_calls import export_and_wait, live

TRACE = bytes(range(31, 47))
START = 1_700_000_000_000_000_000


@pytest.fixture
def send(send_as, key):
    return lambda request: send_as(key, request)


def span_id(number: int) -> bytes:
    return number.to_bytes(8, "big")


def other_span(
    request, number: int, parent: int | None, name: str, attributes: dict, start: int, trace: bytes = TRACE
) -> None:
    """A non-call span (agent, tool, step) added to ``request``."""
    if not request.resource_spans:
        request.resource_spans.add().resource.attributes.append(kv("service.name", "agent"))
    scope = request.resource_spans[0].scope_spans
    span = (scope[0] if scope else scope.add()).spans.add()
    span.trace_id, span.span_id, span.name, span.kind = trace, span_id(number), name, 1
    span.parent_span_id = span_id(parent) if parent is not None else b""
    span.start_time_unix_nano, span.end_time_unix_nano = START + start, START + start + 100
    for key, value in attributes.items():
        span.attributes.append(kv(key, value))


def chat(request, number: int, parent: int, conversation: str, text: str) -> None:
    attributes = {"gen_ai.conversation.id": conversation, "gen_ai.usage.input_tokens": 100 * number}
    attributes["gen_ai.usage.output_tokens"] = number
    factories.chat_span(
        request,
        trace_id=TRACE,
        number=number,
        parent=span_id(parent),
        start=START + number * 10,
        messages=[user_message(text)],
        attributes=attributes,
    )


def invoke_agent(request, number, parent, name, conversation, start) -> None:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    other_span(
        request,
        number,
        parent,
        f"invoke_agent {name}",
        attributes | {"gen_ai.conversation.id": conversation},
        start,
    )


def test_an_agent_span_arriving_last_names_calls_two_levels_below_it_in_the_same_batch(send, project):
    calls = ExportTraceServiceRequest()
    other_span(calls, 101, 100, "step", {}, 5)  # between the agent span and its calls
    chat(calls, 1, 101, "C", "hello")
    chat(calls, 2, 101, "C", "hello")
    send(calls)
    assert list(Call.objects.order_by("seq").values_list("seq", "agent_name")) == [(1, ""), (2, "")]

    agent = ExportTraceServiceRequest()
    invoke_agent(agent, 100, None, "support", "C", 0)
    send(agent)  # the trace's only agent span, in the trace's last batch

    run = Run.objects.get()
    assert list(run.calls.order_by("seq").values_list("seq", "turn", "agent_name", "agent_invocation")) == [
        (1, 1, "support", span_id(100).hex()),
        (2, 1, "support", span_id(100).hex()),
    ]
    assert (run.agent_name, run.call_count, run.analysed_seq) == ("support", 2, 2)


def test_a_delegated_child_run_moves_into_its_parents_session_and_keeps_only_the_link(send, project):
    child = ExportTraceServiceRequest()  # the child's calls end first: they arrive in a run of their own
    chat(child, 2, 12, "C2", "weather in Paris?")
    chat(child, 3, 12, "C2", "weather in Paris?")
    send(child)
    orphan = Run.objects.get(key="C2")
    assert orphan.call_count == 2 and orphan.started_at is not None

    rest = ExportTraceServiceRequest()
    invoke_agent(rest, 12, 11, "expert", "C2", 15)
    other_span(rest, 11, 10, "execute_tool ask_expert", {"gen_ai.operation.name": "execute_tool"}, 14)
    chat(rest, 1, 10, "C1", "plan my trip")
    chat(rest, 4, 10, "C1", "plan my trip")
    invoke_agent(rest, 10, None, "planner", "C1", 0)
    send(rest)

    session = Run.objects.get(key="C1")
    rows = list(
        session.calls.order_by("seq").values_list("span_id", "seq", "turn", "agent_name", "agent_entry")
    )
    assert rows == [
        (span_id(1).hex(), 1, 1, "planner", "root"),
        (span_id(2).hex(), 2, 1, "expert", "delegation"),
        (span_id(3).hex(), 3, 1, "expert", "delegation"),
        (span_id(4).hex(), 4, 1, "planner", "root"),
    ]
    assert (session.call_count, session.turn_count, session.agent_name) == (4, 1, "planner")
    assert (session.prompt_total, session.output, session.parent_run_id) == (1000, 10, None)
    assert session.analysed_seq == 4

    link = Run.objects.get(key="C2")
    assert (link.parent_run_id, link.call_count, link.started_at, link.prompt_total) == (
        session.id,
        0,
        None,
        None,
    )
    assert not Finding.objects.filter(run=link).exists() and link.analysed_seq == 0


def unnamed_chat(request, number: int, parent: int, text: str, trace: bytes = TRACE, **attributes) -> None:
    """A call that names no run (session) of its own, unless given ``attributes`` that do."""
    factories.chat_span(
        request,
        trace_id=trace,
        number=number,
        parent=span_id(parent),
        start=START + number * 10_000,
        messages=[user_message(text)],
        attributes={"gen_ai.usage.input_tokens": 100 * number, "gen_ai.usage.output_tokens": number}
        | attributes,
    )


NEXT_TRACE = bytes(range(51, 67))
PARENTS = {
    "own span": {},  # the user's own span around the agent: no GenAI attribute at all
    "chain": {"openinference.span.kind": "CHAIN"},
    "agent": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
}


@pytest.mark.parametrize("arrival", ["one batch", "parent last", "parent first"])
@pytest.mark.parametrize("parent", PARENTS)
def test_calls_naming_no_session_join_the_one_a_span_above_them_names(send, project, arrival, parent):
    # Span 100 names session S1 around two calls that name none; the next request is another trace whose
    # root (101) names S1 too. A parent ends, and so arrives, after its calls: "parent last" is usual.
    first, second = ExportTraceServiceRequest(), ExportTraceServiceRequest()
    unnamed_chat(first, 1, 100, "plan my trip")
    unnamed_chat(first, 2, 100, "plan my trip")
    parents = first if arrival == "one batch" else second
    other_span(parents, 100, None, "request", PARENTS[parent] | {"session.id": "S1"}, 0)
    for request in [second, first] if arrival == "parent first" else [first, second]:
        if request.resource_spans:
            send(request)
    later = ExportTraceServiceRequest()
    unnamed_chat(later, 3, 101, "and a hotel?", NEXT_TRACE)
    other_span(later, 101, None, "request", PARENTS[parent] | {"session.id": "S1"}, 25_000, NEXT_TRACE)
    send(later)

    session = Run.objects.get(started_at__isnull=False)
    assert (session.key, session.key_source) == ("S1", "session.id")
    assert list(session.calls.order_by("seq").values_list("span_id", "seq", "turn")) == [
        (span_id(1).hex(), 1, 1),
        (span_id(2).hex(), 2, 1),
        (span_id(3).hex(), 3, 2),
    ]
    assert (session.call_count, session.turn_count, session.prompt_total, session.output) == (3, 2, 600, 6)
    assert (session.analysed_seq, session.parent_run_id, session.title) == (3, None, "plan my trip")
    # The run the first trace's calls were in until their parent came keeps only its link.
    for left in Run.objects.exclude(id=session.id):
        assert (left.key, left.call_count, left.prompt_total, left.parent_run_id) == (
            TRACE.hex(),
            0,
            None,
            session.id,
        )
    assert Run.objects.count() == (2 if arrival == "parent last" else 1)


def test_the_nearest_span_naming_a_run_wins_and_a_calls_own_key_above_all(send, project):
    # 100 names S1; 101 under it names S2. Call 1 is under 101, call 2 under 100 names C3 itself, call 3
    # under 100 names nothing. Parents last, as they end.
    calls, parents = ExportTraceServiceRequest(), ExportTraceServiceRequest()
    unnamed_chat(calls, 1, 101, "one")
    unnamed_chat(calls, 2, 100, "two", **{"gen_ai.conversation.id": "C3"})
    unnamed_chat(calls, 3, 100, "three")
    other_span(parents, 101, 100, "step", {"session.id": "S2"}, 1)
    other_span(parents, 100, None, "request", {"session.id": "S1"}, 0)
    send(calls)
    send(parents)
    assert dict(Call.objects.values_list("span_id", "run__key")) == {
        span_id(1).hex(): "S2",
        span_id(2).hex(): "C3",
        span_id(3).hex(): "S1",
    }
    assert not Run.objects.filter(key=TRACE.hex(), call_count__gt=0).exists()


def linked_child_spans() -> dict[str, list]:
    """A planner delegating to an expert that runs in a trace of its own, made by the real OTel SDK: the
    expert's root span links (OTel API ``links=``) to the planner's tool span. Finished spans by part."""
    import json

    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.cross_trace")
    clock = iter(range(START, START + 10**6, 1000))

    def agent(name: str, conversation: str, **options):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        attributes["gen_ai.conversation.id"] = conversation
        return tracer.start_as_current_span(
            f"invoke_agent {name}", attributes=attributes, start_time=next(clock), **options
        )

    def chat(conversation: str, text: str, tokens: int) -> None:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": conversation,
            "gen_ai.request.model": "claude-sonnet-4-5",
            "gen_ai.usage.input_tokens": tokens,
            "gen_ai.usage.output_tokens": 10,
            "gen_ai.input.messages": json.dumps([user_message(text)]),
        }
        with tracer.start_as_current_span(
            "chat claude-sonnet-4-5", attributes=attributes, start_time=next(clock)
        ):
            pass

    with agent("planner", "C1"):
        chat("C1", "plan my trip", 100)
        with tracer.start_as_current_span(
            "execute_tool ask_expert",
            attributes={"gen_ai.operation.name": "execute_tool"},
            start_time=next(clock),
        ) as tool:
            # The expert runs elsewhere: a new trace (empty context), linked to the tool span that asked.
            with agent("expert", "C2", context=Context(), links=[Link(tool.get_span_context())]):
                chat("C2", "weather in Paris?", 200)
                chat("C2", "weather in Paris?", 300)
        chat("C1", "plan my trip", 400)
    provider.shutdown()
    spans = memory.get_finished_spans()
    expert = next(span for span in spans if span.name == "invoke_agent expert")
    child = [span for span in spans if span.context.trace_id == expert.context.trace_id]
    return {
        "parent": [span for span in spans if span not in child],
        "child_calls": [span for span in child if span is not expert],
        "child_agent": [expert],
    }


ARRIVALS = {
    "parent-first": ["parent", "child_calls", "child_agent"],
    "child-first": ["child_calls", "child_agent", "parent"],
    "child-agent-last": ["child_calls", "parent", "child_agent"],
    "child-agent-first": ["child_agent", "parent", "child_calls"],
}


@pytest.mark.parametrize("arrival", ARRIVALS)
def test_a_child_agent_in_a_linked_trace_lands_in_its_parents_session_whatever_arrives_first(
    send, project, arrival
):
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    parts = linked_child_spans()
    assert len({span.context.trace_id for span in parts["parent"] + parts["child_agent"]}) == 2
    for part in ARRIVALS[arrival]:
        send(encode_spans(parts[part]))  # what the OTLP exporter sends

    session = Run.objects.get(key="C1")
    rows = list(
        session.calls.order_by("seq").values_list("seq", "turn", "agent_name", "agent_entry", "prompt_total")
    )
    assert rows == [
        (1, 1, "planner", "root", 100),
        (2, 1, "expert", "delegation", 200),
        (3, 1, "expert", "delegation", 300),
        (4, 1, "planner", "root", 400),
    ]
    assert (session.call_count, session.turn_count, session.agent_name, session.parent_run_id) == (
        4,
        1,
        "planner",
        None,
    )
    assert session.prompt_total == 1000 and session.analysed_seq == 4
    child = Run.objects.filter(key="C2").first()
    if child is not None:  # the child run exists only if its calls arrived before their parent was known
        assert (child.parent_run_id, child.call_count, child.prompt_total) == (session.id, 0, None)


@live
def test_a_linked_child_trace_sent_first_by_the_otlp_exporter_joins_its_parent_session(live_server, key):
    """The real OTLP/HTTP exporter and a real worker: the child's trace, then the parent's."""
    parts = linked_child_spans()
    export_and_wait(live_server.url, key, parts["child_calls"] + parts["child_agent"])
    assert Run.objects.get(key="C2").call_count == 2  # the parent is not known yet
    export_and_wait(live_server.url, key, parts["parent"])
    session = Run.objects.get(key="C1")
    assert list(session.calls.order_by("seq").values_list("agent_name", "agent_entry")) == [
        ("planner", "root"),
        ("expert", "delegation"),
        ("expert", "delegation"),
        ("planner", "root"),
    ]
    assert Run.objects.get(key="C2").parent_run_id == session.id


@pytest.mark.django_db
def test_the_traces_linking_into_a_batchs_agents_are_found_from_the_linked_roots_alone(project):
    """A batch with agent spans asks which stored traces link into them. Matching every root span's links
    as text read the whole project's spans for each batch; the partial GIN index answers it."""
    from django.db import connection

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (the index is its own)")
    resource = Resource.objects.create(project=project, hash="r", service_name="s", attributes={})
    with connection.cursor() as cursor:  # 20,000 spans of the project, one root in 61 (none linked)
        cursor.execute(
            "INSERT INTO ingest_span (project_id, resource_id, trace_id, span_id, parent_span_id, name, kind,"
            " start_time_unix_nano, end_time_unix_nano, status_code, status_message, scope_name,"
            " scope_version, attributes, events, links, received_at)"
            " SELECT %s, %s, md5(g::text), lpad(to_hex(g), 16, '0'), CASE WHEN g %% 61 = 0 THEN '' ELSE 'p'"
            " END, 'chat', 3, g, g, 0, '', '', '', '{}', '[]', '[]', now() FROM generate_series(1, 20000) g",
            [project.id, resource.id],
        )
        cursor.execute("ANALYZE ingest_span")
    roots = Span.objects.filter(project_id=project.id, parent_span_id="").exclude(links=[])
    plan = agent_sessions._linking_into(roots, {"a" * 32, "b" * 32}).explain()
    assert "span_linked_roots" in plan, plan
    # On PostgreSQL the table is partitioned by day (ingest.partitions): the planner reads a partition
    # that holds nothing whole, at no cost; the one holding the 20,000 spans must be read by the index.
    with connection.cursor() as cursor:
        for partition in re.findall(r"Seq Scan on (\w+)", plan):
            cursor.execute(f"SELECT count(*) FROM {partition}")
            assert cursor.fetchone() == (0,), plan


def test_the_spans_naming_a_run_are_read_from_their_partial_index_not_the_whole_trace(project):
    """A batch of calls that name no run looks for a span above them that names one. Reading every stored
    span of the trace (and its attributes) grew with the trace; the partial index holds only the spans
    that name a run, with the predicate of the query key for key (a changed RUN_KEYS breaks this)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (the index is its own)")
    resource = Resource.objects.create(project=project, hash="r", service_name="s", attributes={})
    with connection.cursor() as cursor:  # one trace of 20,000 chat spans, one root naming a session
        cursor.execute(
            "INSERT INTO ingest_span (project_id, resource_id, trace_id, span_id, parent_span_id, name, kind,"
            " start_time_unix_nano, end_time_unix_nano, status_code, status_message, scope_name,"
            " scope_version, attributes, events, links, received_at)"
            " SELECT %s, %s, repeat('a', 32), lpad(to_hex(g), 16, '0'), CASE WHEN g = 1 THEN '' ELSE"
            " lpad(to_hex(1), 16, '0') END, 'chat', 3, g, g, 0, '', '', '', CASE WHEN g = 1 THEN"
            ' \'{"session.id": "s-1"}\'::jsonb ELSE \'{"gen_ai.operation.name": "chat"}\'::jsonb END,'
            " '[]', '[]', now() FROM generate_series(1, 20000) g",
            [project.id, resource.id],
        )
        cursor.execute("ANALYZE ingest_span")
    assert agent_sessions._named_runs(project.id, {"a" * 32}) == {
        "a" * 32: {f"{1:016x}": ("s-1", "session.id")}
    }
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")  # the index or the trace's every span: which one
        captured = []
        with connection.execute_wrapper(
            lambda execute, sql, params, many, context: (
                captured.append((sql, params)) or execute(sql, params, many, context)
            )
        ):
            agent_sessions._named_runs(project.id, {"a" * 32})
        sql, params = captured[-1]
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "span_named_runs" in plan, plan
