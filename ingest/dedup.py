"""One request, two spans: keep one call per model request.

The Anthropic SDK (2.x) traces itself whenever a tracer provider is set, so with an instrumentation
on top every request has two model-call spans: nested (OpenInference's messages.create) or siblings
with the same response id (OpenLLMetry). Keep one call per request, chosen by a fixed rule so the
result does not depend on which span arrived first.
"""

from collections import defaultdict
from dataclasses import replace
from itertools import combinations

from django.db.models import Q

from ingest.call_rows import Batch
from ingest.models import Call
from ingest.records import CallRecord


def _preference(entry: CallRecord | Call, others: list) -> tuple:
    is_outer = any(other.parent_span_id == entry.span_id for other in others)
    return (not entry.content_captured, not is_outer, entry.start_ns, entry.span_id)


def without_duplicates(batch: Batch, records: list[CallRecord]) -> tuple[list[CallRecord], list[Call]]:
    """New records minus those duplicating another call of their request; stored calls they replace."""
    if not records:
        return records, []
    stored = list(
        Call.objects.filter(
            project_id=batch.project_id, trace_id__in={record.trace_id for record in records}
        ).filter(_may_be_one_request(records))
    )
    # In start order, so that which spans join does not depend on which arrived first.
    entries: list[CallRecord | Call] = sorted(
        [*records, *stored], key=lambda entry: (entry.start_ns, entry.span_id)
    )

    group_of = list(range(len(entries)))  # union-find over "same request"
    # The response ids in each group: a group never holds two, even through a span that has none.
    response_ids = [{entry.response_id} - {""} for entry in entries]

    def root(index: int) -> int:
        while group_of[index] != index:
            group_of[index] = group_of[group_of[index]]
            index = group_of[index]
        return index

    # Only entries of one trace can be one request: compare within traces, and only the pairs that may
    # be one request, in the order every pair used to be compared (so the groups are the same).
    by_trace: dict[str, list[int]] = defaultdict(list)
    for index, entry in enumerate(entries):
        by_trace[entry.trace_id].append(index)
    for indexes in by_trace.values():
        for i, j in candidate_pairs(entries, indexes):
            first, second = root(i), root(j)
            if first == second or len(response_ids[first] | response_ids[second]) > 1:
                continue
            if same_request(entries[i], entries[j]):
                group_of[second] = first
                response_ids[first] |= response_ids[second]
    groups: dict[int, list] = defaultdict(list)
    for index, entry in enumerate(entries):
        groups[root(index)].append(entry)
    keep, replaced = [], []
    for members in groups.values():
        winner = min(members, key=lambda entry: _preference(entry, members))
        losers = [entry.span_id for entry in members if entry is not winner]
        if isinstance(winner, CallRecord):
            if losers:
                note = f"{len(losers)} other span(s) of the same request ignored: {', '.join(losers)}"
                winner = replace(winner, notes=(*winner.notes, note))
            keep.append(winner)
        replaced.extend(entry for entry in members if isinstance(entry, Call) and entry is not winner)
    return keep, replaced


def _may_be_one_request(records: list[CallRecord]) -> Q:
    """The stored calls that may be one request with one of ``records``: the same response id, or
    nested or twin spans where one of the two has no response id (two different ones are two
    requests; on agents whose calls all have one, a trace's stored calls were read back for nothing).

    Leaving the others out changes no group: two stored calls were never one request (one of them
    would have been replaced), so a stored call joins a group only through a record it may be one
    request with."""
    response_ids = {record.response_id for record in records if record.response_id}
    parents = {record.parent_span_id for record in records if record.parent_span_id}
    spans = {record.span_id for record in records}
    without_id = [record for record in records if not record.response_id]
    parents_without_id = {record.parent_span_id for record in without_id if record.parent_span_id}
    spans_without_id = {record.span_id for record in without_id}
    return (
        Q(response_id__any_of=response_ids)
        | Q(span_id__any_of=parents_without_id)
        | Q(parent_span_id__any_of=spans_without_id | parents_without_id)
        | Q(response_id="") & (Q(span_id__any_of=parents) | Q(parent_span_id__any_of=spans | parents))
    )


def same_request(a: CallRecord | Call, b: CallRecord | Call) -> bool:
    """Whether two entries of one trace are spans of the same model request."""
    if a.response_id and a.response_id == b.response_id:
        return True
    if a.response_id and b.response_id:
        return False
    # Nested or twin spans are one request only if nothing says otherwise: parallel calls under one
    # agent can overlap with the same usage, but their responses or their prompts differ. (The
    # prompts last: comparing them for every pair of a trace's calls was 7% of a batch's CPU.)
    nested = a.parent_span_id == b.span_id or b.parent_span_id == a.span_id
    return (nested or _twins(a, b)) and not _prompts_differ(a, b)


def candidate_pairs(entries: list, indexes: list[int]) -> list[tuple[int, int]]:
    """The pairs (i < j, in order) of these entries of one trace that ``same_request`` may hold for:
    a response id in common, or one span nested in the other or one parent (twins) where one of the two
    has no response id. No other pair can be one request; comparing every pair was 1,225 pairs for a
    trace of 50 calls without parents."""
    by_response: dict[str, list[int]] = defaultdict(list)
    by_parent: dict[str, list[int]] = defaultdict(list)
    by_span: dict[str, list[int]] = defaultdict(list)
    for index in indexes:
        entry = entries[index]
        if entry.response_id:
            by_response[entry.response_id].append(index)
        if entry.parent_span_id:
            by_parent[entry.parent_span_id].append(index)
        by_span[entry.span_id].append(index)
    pairs: set[tuple[int, int]] = set()
    for group in by_response.values():
        pairs.update(combinations(group, 2))  # each group is in index order
    # Nested or twin spans with two different response ids are two requests: only pairs where one of
    # the two has none (60 calls under one agent span, each with its id, were 1,770 pairs for nothing).
    for group in by_parent.values():
        if any(not entries[index].response_id for index in group):
            pairs.update(
                (i, j)
                for i, j in combinations(group, 2)
                if not (entries[i].response_id and entries[j].response_id)
            )
    for index in indexes:
        parent_span = entries[index].parent_span_id
        for parent in by_span.get(parent_span, ()) if parent_span else ():
            if parent != index and not (entries[index].response_id and entries[parent].response_id):
                pairs.add((min(index, parent), max(index, parent)))
    return sorted(pairs)


def _usage_of(entry: CallRecord | Call) -> tuple:
    usage = entry.usage.to_dict() if isinstance(entry, CallRecord) else entry.usage_dict()
    return usage["prompt_total"], usage["output"]


def _user_messages(entry: CallRecord | Call) -> tuple[str, ...]:
    """Hashes of the user messages a call sent; empty when its content was not captured."""
    if not entry.content_captured:
        return ()
    if isinstance(entry, CallRecord):
        return tuple(item.hash for item in entry.items if item.kind == "message" and item.role == "user")
    return tuple(
        item["hash"] for item in entry.items if item["kind"] == "message" and item.get("role") == "user"
    )


def _prompts_differ(a: CallRecord | Call, b: CallRecord | Call) -> bool:
    # Instrumentations render system prompts, tools and tool results differently (tests/instrumented/
    # README.md), so two spans of one request differ there; the user messages they agree on.
    first, second = _user_messages(a), _user_messages(b)
    return bool(first and second) and first != second


def _twins(a: CallRecord | Call, b: CallRecord | Call) -> bool:
    """Sibling spans of one request without a response id: same parent, overlapping, same usage."""
    if not (a.parent_span_id and a.parent_span_id == b.parent_span_id):
        return False
    usage = _usage_of(a)
    return a.start_ns <= b.end_ns and b.start_ns <= a.end_ns and None not in usage and usage == _usage_of(b)
