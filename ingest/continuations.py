"""Requests that send only their new items and name the response they continue (the Responses API's
``previous_response_id``): the provider keeps the earlier turns, so the window is rebuilt from the call
that answered that response. No Django here.

A rebuilt window is the request's own instructions and tools, then the continued call's conversation
(its window without its instructions and tools, which the new request restates: Responses
``instructions`` are not carried over), then that call's answer, then the new items. A window is rebuilt
only when its whole chain is: a call whose chain lacks a response keeps the items it sent and names the
response it lacks (its ``gap``), so that it is rebuilt when the call answering that response arrives.
"""

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxcore.vocabulary import Item, evolve
from ingest.families.base import PREVIOUS_RESPONSE

NOTE_PREFIX = "the request continues "
NOTE_LIMIT = 300

# Leading items a request restates rather than continues: its tools and instructions.
_RESTATED_BUCKETS = frozenset({"tools", "system"})


@dataclass(frozen=True)
class Request:
    """A call as the rebuild sees it: what it sent, what it continues, what it answered."""

    key: Hashable
    span_id: str
    items: tuple[Item, ...]  # the items the request sent
    continues: str  # the response it continues ("" none)
    response_id: str  # its own response ("" unknown)
    answer: tuple[Item, ...]  # its output as items


@dataclass(frozen=True)
class Answered:
    """What a continuing request finds of a stored call that answered the response it names."""

    span_id: str
    items: tuple[Item, ...]  # that call's window (rebuilt where it was)
    answer: tuple[Item, ...]
    gap: str  # a response whose turns that call's window lacks ("" none)


@dataclass(frozen=True)
class Window:
    items: tuple[Item, ...]
    gap: str = ""  # a response whose turns the window lacks ("" none)
    rebuilt_from: str = ""  # the span of the call it was rebuilt from ("" not rebuilt)


def not_rebuilt_note(what: str, identifier: str) -> str:
    """The request sent only its new items and the call answering ``identifier`` was not found."""
    return (
        f"{NOTE_PREFIX}{what} {identifier}: the provider kept the earlier turns, so this window "
        "holds only the items the request sent (not rebuilt)"
    )[:NOTE_LIMIT]


def rebuilt_note(identifier: str, span_id: str) -> str:
    return (
        f"{NOTE_PREFIX}{PREVIOUS_RESPONSE} {identifier}: the provider kept the earlier turns; this window "
        f"was rebuilt from the call that answered it (span {span_id}): its window and answer, then the "
        "items the request sent"
    )[:NOTE_LIMIT]


def with_note(notes: Iterable[str], note: str) -> list[str]:
    """``notes`` with the continuation note replaced by ``note``."""
    return [*(kept for kept in notes if not kept.startswith(NOTE_PREFIX)), note]


def answer_messages(outputs: list[dict] | None) -> list[dict]:
    """Output messages as a later request would send them back: role and parts, no finish reason."""
    return [{"role": message["role"], "parts": message["parts"]} for message in outputs or []]


def _restated(items: Sequence[Item]) -> int:
    """How many of the leading items are tools and instructions."""
    count = 0
    for item in items:
        if item.bucket not in _RESTATED_BUCKETS:
            break
        count += 1
    return count


def _base_id(item_id: str) -> str:
    """The id ``derive_items`` gave before marking a repeat (``msg:…#2``)."""
    head, mark, number = item_id.rpartition("#")
    return head if mark and head and number.isdigit() else item_id


def _renumbered(items: Sequence[Item]) -> tuple[Item, ...]:
    """Positions in order, and repeated ids marked as ``derive_items`` marks them over one list."""
    seen: dict[str, int] = {}
    made = []
    for position, item in enumerate(items):
        base = _base_id(item.id)
        seen[base] = seen.get(base, 0) + 1
        item_id = base if seen[base] == 1 else f"{base}#{seen[base]}"
        same = item_id == item.id and position == item.position
        made.append(item if same else evolve(item, id=item_id, position=position))
    return tuple(made)


def rebuilt_items(own: Sequence[Item], continued: Sequence[Item], answer: Sequence[Item]) -> tuple[Item, ...]:
    """The request's tools and instructions, the continued call's conversation, its answer, the new items."""
    head = _restated(own)
    return _renumbered([*own[:head], *continued[_restated(continued) :], *answer, *own[head:]])


def windows(requests: Sequence[Request], stored: Mapping[str, Answered]) -> dict[Hashable, Window]:
    """The window of each request that continues a response, by key.

    The call answering a response is one of ``requests`` (the first to answer it) or else ``stored``
    (by response id). Chains among ``requests`` are followed in any order, without recursion."""
    answering: dict[str, Request] = {}
    for request in requests:
        if request.response_id:
            answering.setdefault(request.response_id, request)
    done: dict[Hashable, Window] = {}

    def source_of(request: Request) -> Answered | None:
        parent = answering.get(request.continues)
        if parent is None:
            return stored.get(request.continues)
        if not parent.continues:
            return Answered(parent.span_id, parent.items, parent.answer, "")
        window = done.get(parent.key)
        if window is None:  # a cycle of responses: nothing to rebuild from
            return None
        return Answered(parent.span_id, window.items, parent.answer, window.gap)

    for request in requests:
        path: list[Request] = []
        current: Request | None = request
        walked: set[Hashable] = set()
        # Up the chain to a request built already, one that continues nothing, or one not here.
        while current is not None and current.continues:
            if current.key in walked or current.key in done:
                break
            walked.add(current.key)
            path.append(current)
            current = answering.get(current.continues)
        for waiting in reversed(path):
            source = source_of(waiting)
            if source is None:
                done[waiting.key] = Window(waiting.items, gap=waiting.continues)
            elif source.gap:
                done[waiting.key] = Window(waiting.items, gap=source.gap)
            else:
                items = rebuilt_items(waiting.items, source.items, source.answer)
                done[waiting.key] = Window(items, rebuilt_from=source.span_id)
    return done
