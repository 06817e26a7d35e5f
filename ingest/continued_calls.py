"""Continued requests' windows rebuilt as a span batch is written (the rules: ``ingest.continuations``).

A request that names the response it continues (and sent only its new items) is rebuilt from the call
that answered it: one of the batch's, else a stored one, found by its response id (indexed). A stored
call that waits for a response this batch brings (its ``window_gap``: it arrived before the call it
continues) is rebuilt too, and its run renumbered and analysed again from it, as a run with a late call
is (``number_and_analyse``, ``renumber_late``). Whatever the runs' lengths: one query a part (the
waiting calls, on a partial index), and two or three more where a request continues a response.
"""

from collections.abc import Iterable
from dataclasses import replace

from ctxcore.vocabulary import Item
from ingest import continuations, itemlists
from ingest.bulk import update_rows
from ingest.continuations import Answered, Request, Window
from ingest.models import Call, ItemList
from ingest.records import CallRecord
from ingest.work import BatchWork

# What the rebuild reads of a stored call: the call that answered a response, or one waiting for it.
_READ = (
    "run",
    "span_id",
    "response_id",
    "continues_response",
    "window_gap",
    "item_list",
    "output_items",
    "notes",
)


def find_waiting(work: BatchWork) -> None:
    """The stored calls waiting for a response this part brings: their runs are locked with the batch's."""
    answered = {record.response_id for record in work.new if record.response_id and record.content_captured}
    if answered:
        work.waiting = list(
            Call.objects.filter(project_id=work.batch.project_id, window_gap__any_of=answered)
            .exclude(window_gap="")  # the partial index's predicate
            .values_list("id", "run_id")
        )


def rebuild(work: BatchWork) -> None:
    """The windows of the part's continuing requests, and of the stored calls that waited for its
    responses; a stored call rebuilt now loses its number, so that its run is renumbered and analysed
    again from it."""
    if not work.waiting and not any(record.continues_response for record in work.new):
        return
    waiting = _waiting_calls(work)
    requests = [_from_record(index, record) for index, record in enumerate(work.new)]
    requests += [_from_call(call) for call in waiting]
    answered_here = {request.response_id for request in requests if request.response_id}
    wanted = {request.continues for request in requests if request.continues} - answered_here
    stored = _answering(work.batch.project_id, wanted, {call.id for call in waiting})
    windows = continuations.windows(requests, stored)
    for index, record in enumerate(work.new):
        window = windows.get(("record", index))
        if window is not None:
            work.new[index] = _rebuilt_record(record, window)
    rebuilt, gap_only = [], []
    for call in waiting:
        window = windows[("call", call.id)]
        if window.rebuilt_from:
            call.items = [item.to_dict() for item in window.items]
            call.notes = continuations.with_note(
                call.notes, continuations.rebuilt_note(call.continues_response, window.rebuilt_from)
            )
            call.window_gap = ""
            call.seq = call.turn = None  # its run is renumbered and analysed again from it
            rebuilt.append(call)
        elif window.gap != call.window_gap:  # the call it continues came, but not the whole chain
            call.window_gap = window.gap
            gap_only.append(call)
    itemlists.store(work.batch.project_id, rebuilt)
    update_rows(Call, rebuilt, ["item_list", "notes", "window_gap", "seq", "turn"])
    update_rows(Call, gap_only, ["window_gap"])
    work.renumber |= {call.run_id for call in rebuilt}


def _waiting_calls(work: BatchWork) -> list[Call]:
    """The waiting calls found before the runs were locked, read again now that they are (a call another
    batch rebuilt meanwhile no longer waits; one moved to a run not locked here waits on)."""
    if not work.waiting:
        return []
    answered = {record.response_id for record in work.new if record.response_id and record.content_captured}
    locked = {run.id for run in work.runs.values()}
    calls = list(
        Call.objects.filter(
            id__in=[call_id for call_id, _ in work.waiting], run_id__in=locked, window_gap__any_of=answered
        ).only(*_READ)
    )
    ItemList.objects.load(calls)
    return calls


def _items(stored: Iterable[dict]) -> tuple[Item, ...]:
    return tuple(Item.from_dict(data, position) for position, data in enumerate(stored))


def _from_record(index: int, record: CallRecord) -> Request:
    return Request(
        key=("record", index),
        span_id=record.span_id,
        items=record.items,
        continues=record.continues_response,
        # A call whose content was not captured has no window to rebuild from.
        response_id=record.response_id if record.content_captured else "",
        answer=record.output_items,
    )


def _from_call(call: Call) -> Request:
    """A waiting call: its items are still those it sent (a window is rebuilt only whole)."""
    return Request(
        key=("call", call.id),
        span_id=call.span_id,
        items=_items(call.items),
        continues=call.continues_response,
        response_id=call.response_id,
        answer=_items(call.output_items),
    )


def _answering(project_id: int, wanted: set[str], waiting: set[int]) -> dict[str, Answered]:
    """The stored call that answered each of these responses (the first to start, where two did)."""
    if not wanted:
        return {}
    calls = list(
        Call.objects.filter(project_id=project_id, response_id__any_of=wanted, content_captured=True)
        .exclude(response_id="")  # the partial index's predicate
        .exclude(id__in=waiting)
        .order_by("start_ns", "span_id")
        .only(*_READ)
    )
    first: dict[str, Call] = {}
    for call in calls:
        first.setdefault(call.response_id, call)
    ItemList.objects.load(list(first.values()))
    return {
        response_id: Answered(call.span_id, _items(call.items), _items(call.output_items), call.window_gap)
        for response_id, call in first.items()
    }


def _rebuilt_record(record: CallRecord, window: Window) -> CallRecord:
    if not window.rebuilt_from:
        return record if window.gap == record.window_gap else replace(record, window_gap=window.gap)
    note = continuations.rebuilt_note(record.continues_response, window.rebuilt_from)
    return replace(
        record,
        items=window.items,
        notes=tuple(continuations.with_note(record.notes, note)),
        window_gap="",
    )
