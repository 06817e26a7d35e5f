"""Calls' items stored as lists based on their run's previous list: every call rebuilds exactly, whatever
the order its spans arrive in, and search and retention still see every item."""

import random

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview.search import runs_with_item
from ingest import itemlists
from ingest.models import Call, Content, ItemList, Run
from ingest.retention import delete_runs
from tests import factories
from tests.factories import assistant_message, user_message

TRACE = bytes(range(1, 17))


def conversation(calls: int, window: int | None = None) -> list[ExportTraceServiceRequest]:
    """One request per call; each call resends the history (its last ``window`` messages, if given)."""
    history: list[dict] = []
    requests = []
    for number in range(1, calls + 1):
        history.append(user_message(f"question {number}"))
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=history[-window:] if window else list(history),
            attributes={"gen_ai.conversation.id": "conv-1", "gen_ai.usage.input_tokens": 100 * number},
        )
        requests.append(request)
        history.append(assistant_message(f"answer {number}"))
    return requests


def merged(requests: list[ExportTraceServiceRequest]) -> ExportTraceServiceRequest:
    """One request holding every span of these (one batch)."""
    request = ExportTraceServiceRequest()
    for single in requests:
        request.resource_spans.extend(single.resource_spans)
    return request


@pytest.fixture
def send(send_as):
    return send_as


@pytest.fixture
def reference(send, monkeypatch):
    """The items of each call as stored whole (every list a snapshot), by span id."""

    def reference(requests: list[ExportTraceServiceRequest]) -> dict[str, list[dict]]:
        project, key = factories.project_with_key("whole")
        with monkeypatch.context() as patch:
            patch.setattr(itemlists, "MAX_DEPTH", -1)
            for request in requests:
                send(key, request)
        calls = Call.objects.filter(project=project)
        assert not ItemList.objects.filter(project=project, whole__isnull=True).exists()
        return {call.span_id: call.items for call in calls}

    return reference


def stored(project) -> dict[str, list[dict]]:
    # Read one call at a time as well as a whole run at once: both paths rebuild the lists.
    one = {call.span_id: Call.objects.get(id=call.id).items for call in Call.objects.filter(project=project)}
    every = {call.span_id: call.items for call in Call.objects.filter(project=project)}
    assert one == every
    return every


def test_a_run_sent_in_order_stores_each_call_as_the_items_it_added(send, project, key, reference):
    requests = conversation(40)
    for request in requests:
        send(key, request)
    assert stored(project) == reference(requests)
    lists = ItemList.objects.filter(project=project)
    # Each call adds one answer and one question: a list holds those two, never the history (but the
    # snapshots, which hold it compressed in ``whole``).
    assert max(len(entered) for entered in lists.values_list("entered", flat=True)) <= 2
    depths = sorted(lists.values_list("depth", flat=True))
    assert max(depths) == itemlists.MAX_DEPTH
    # Snapshots: call 1, call 2 (two of its three items are new), and call 34 after MAX_DEPTH deltas.
    assert depths.count(0) == 3


def test_late_and_reversed_calls_rebuild_exactly_and_are_renumbered(send, project, key, reference):
    requests = conversation(30)
    order = list(range(30))
    random.Random(5).shuffle(order)
    # Single late calls, then batches that hold several calls of the run in reverse order.
    for index in order[:12]:
        send(key, requests[index])
    rest = order[12:]
    for start in range(0, len(rest), 6):
        send(key, merged([requests[index] for index in sorted(rest[start : start + 6], reverse=True)]))
    assert stored(project) == reference(requests)
    seqs = list(Call.objects.filter(project=project).order_by("start_ns").values_list("seq", flat=True))
    assert seqs == list(range(1, 31))
    assert ItemList.objects.filter(project=project, whole__isnull=True).exists()


def test_a_sliding_window_rebuilds(send, project, key, reference):
    requests = conversation(25, window=5)
    send(key, merged(requests[:10]))
    for request in requests[10:]:
        send(key, request)
    assert stored(project) == reference(requests)


def test_search_finds_a_run_by_an_item_that_entered_mid_run_and_only_that_run(send, project, key):
    for request in conversation(12):
        send(key, request)
    run = Run.objects.get(project=project)
    call = Call.objects.get(project=project, seq=7)
    entered = call.items[-1]
    held = runs_with_item([project.id], {"id": entered["id"]})
    assert list(held) == [run.id]
    assert list(runs_with_item([project.id], {"hash": entered["hash"]})) == [run.id]
    assert list(runs_with_item([project.id], {"id": "msg:nothing-like-it"})) == []
    other, _ = factories.project_with_key("other")
    assert list(runs_with_item([other.id], {"id": entered["id"]})) == []


def test_deleting_a_run_deletes_its_lists_and_the_content_only_they_held(send, project, key):
    for request in conversation(8):
        send(key, request)
    run = Run.objects.get(project=project)
    assert Content.objects.filter(project=project).exists()
    delete_runs(project.id, [run.id])
    assert not ItemList.objects.filter(project=project).exists()
    assert not Content.objects.filter(project=project).exists()


def test_a_list_another_call_is_based_on_is_kept_when_its_call_is_deleted(send, project, key):
    for request in conversation(6):
        send(key, request)
    calls = {call.seq: call for call in Call.objects.filter(project=project)}
    expected = calls[4].items
    based_on = calls[3].item_list_id
    assert ItemList.objects.get(id=calls[4].item_list_id).base_id == based_on
    calls[3].delete()
    assert itemlists.collect(project.id) == set()
    assert ItemList.objects.filter(id=based_on).exists()
    assert Call.objects.get(id=calls[4].id).items == expected


def test_setting_items_without_storing_them_is_refused(send, project, key):
    send(key, conversation(1)[0])
    call = Call.objects.get(project=project)
    call.items = []
    with pytest.raises(ValueError, match="store"):
        call.save()
    itemlists.store(project.id, [call])
    call.save()
    assert Call.objects.get(id=call.id).items == []


def test_deleting_a_project_deletes_its_calls_and_their_chained_lists(send, project, key):
    for request in conversation(5):
        send(key, request)
    assert ItemList.objects.filter(project=project, whole__isnull=True).exists()
    project.delete()
    assert not ItemList.objects.exists() and not Call.objects.exists()
