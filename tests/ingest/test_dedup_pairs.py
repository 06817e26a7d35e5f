"""The duplicate-request check compares only the pairs of a trace's calls that may be one request: every
pair it skips is one that ``same_request`` rejects, so the groups it makes are those of comparing all."""

from itertools import combinations, product

from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.dedup import _may_be_one_request, candidate_pairs, same_request
from ingest.models import Call, Run

# Few distinct values, so that shared response ids, parents, overlaps and equal usage all happen.
SPANS = ["a", "b", "c", "d", "e"]


@st.composite
def calls(draw) -> Call:
    call = Call(
        trace_id="t",
        span_id=draw(st.sampled_from(SPANS)),
        parent_span_id=draw(st.sampled_from(["", *SPANS])),
        response_id=draw(st.sampled_from(["", "", "r1", "r2"])),
        start_ns=draw(st.integers(0, 3)),
        end_ns=draw(st.integers(3, 6)),
        content_captured=draw(st.booleans()),
        prompt_total=draw(st.sampled_from([None, 10, 20])),
        output=draw(st.sampled_from([None, 5])),
    )
    users = draw(st.lists(st.sampled_from(["h1", "h2"]), max_size=2))
    call.items = [{"id": f"msg:{h}", "kind": "message", "role": "user", "hash": h} for h in users]
    return call


@settings(max_examples=500, deadline=None)
@given(st.lists(calls(), max_size=8))
def test_every_pair_that_may_be_one_request_is_a_candidate(entries):
    indexes = list(range(len(entries)))
    candidates = candidate_pairs(entries, indexes)
    assert candidates == sorted(set(candidates))  # in the order all pairs were compared, once each
    matching = [(i, j) for i, j in combinations(indexes, 2) if same_request(entries[i], entries[j])]
    assert set(matching) <= set(candidates)


def test_calls_without_parents_or_response_ids_make_no_pairs():
    # A trace of 50 root chat spans (the bench's chats): 1,225 pairs compared before, none may match.
    entries = [Call(trace_id="t", span_id=f"s{n}", parent_span_id="", response_id="") for n in range(50)]
    assert candidate_pairs(entries, list(range(50))) == []


def test_calls_under_one_agent_span_each_with_its_response_id_make_no_pairs():
    # The conversations load: 60 chat spans under one agent span, each with its response id (1,770
    # pairs compared before, none may match).
    entries = [
        Call(trace_id="t", span_id=f"s{n}", parent_span_id="agent", response_id=f"r{n}") for n in range(60)
    ]
    assert candidate_pairs(entries, list(range(60))) == []


def test_the_stored_calls_left_unread_are_never_one_request_with_a_new_one(project):
    run = Run.objects.create(project=project, key="r")

    def call(span_id: str, parent: str, response_id: str, save: bool = True) -> Call:
        made = Call(project=project, run=run, trace_id="t" * 32, span_id=span_id, parent_span_id=parent,
                    response_id=response_id, start_ns=0, end_ns=5, started_at=timezone.now(),
                    prompt_total=10, output=5)  # fmt: skip
        if save:
            made.save()
        return made

    # Stored: siblings, parents and children of the new calls, with and without response ids.
    relations = product(["", "agent", "a", "b", "c", "x"], ["", "r1", "r9"])
    stored = [call(f"s{n}", parent, response_id) for n, (parent, response_id) in enumerate(relations)]
    stored += [call("agent", "", "r5"), call("x", "", "")]
    new = [call("a", "agent", "r1", False), call("b", "agent", "r2", False), call("c", "x", "", False)]

    read = set(Call.objects.filter(_may_be_one_request(new)).values_list("span_id", flat=True))
    for stored_call in stored:
        if stored_call.span_id not in read:
            assert not any(same_request(record, stored_call) for record in new), stored_call.span_id
    # A sibling with another response id is left unread; one without, or with the same, is read.
    assert {"s3", "s4"} <= read and "s5" not in read
