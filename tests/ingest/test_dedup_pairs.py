"""The duplicate-request check compares only the pairs of a trace's calls that may be one request: every
pair it skips is one that ``same_request`` rejects, so the groups it makes are those of comparing all."""

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.dedup import candidate_pairs, same_request
from ingest.models import Call

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
