"""The incremental driver: input shapes, order, and a state that does not grow with the run."""

import json

import pytest

from ctxcore.analysis import DEFAULT_CONFIG, CallInput, OutdatedState, OutOfOrder, analyse_call, new_state
from tests.ctxcore.analysis.builders import SECOND, T0, analyse, call, message, system, tool


def test_a_stored_call_dict_with_default_fields_left_out_is_read_with_ingests_defaults():
    stored = {
        "seq": 3,
        "start_ns": T0,
        "end_ns": T0 + SECOND,
        "model": "gpt-4o",
        "provider": "openai",
        "usage": {"prompt_total": 1200, "cache_read": None},
        "items": [{"id": "m1", "kind": "message", "bucket": "conversation", "hash": "ab" * 16}],
        "manifest_source": "derived",
        "tool_definitions": None,
    }
    entry = CallInput.from_dict(stored).items[0]

    assert (entry.position, entry.tokens, entry.tokens_estimated, entry.mode, entry.pinned) == (
        0,
        None,
        True,
        "verbatim",
        False,
    )
    assert CallInput.from_dict(stored).usage.uncached is None


def test_a_call_at_or_before_the_states_last_call_is_refused():
    _, state = analyse_call(new_state(), call(5, [system()]))
    with pytest.raises(OutOfOrder):
        analyse_call(state, call(5, [system()]))
    with pytest.raises(OutOfOrder):
        analyse_call(state, call(4, [system()]))


def test_a_state_from_another_schema_is_refused():
    with pytest.raises(OutdatedState):
        analyse_call({**new_state(), "schema": 0}, call(1, [system()]))


def test_the_given_state_is_not_modified():
    _, state = analyse([call(1, [system(), message(1)])])
    before = json.dumps(state, sort_keys=True)
    analyse_call(state, call(2, [system("Changed"), message(1)], read=0))
    assert json.dumps(state, sort_keys=True) == before


def test_the_state_does_not_grow_with_the_number_of_calls():
    def window(seq):  # a sliding window of the last 30 messages
        return [tool("search_logs"), system(), *(message(n) for n in range(max(1, seq - 29), seq + 1))]

    _, state = analyse([call(seq, window(seq)) for seq in range(1, 101)])
    size_100 = len(json.dumps(state))
    _, state = analyse([call(seq, window(seq)) for seq in range(101, 501)], state)
    assert len(json.dumps(state)) <= size_100 * 1.05
    assert len(state["recent"]) <= 8


def test_the_state_does_not_grow_with_the_number_of_agents():
    def subagent_call(seq):  # Claude Code style: every three calls a new subagent, with its own id
        agent = f"subagent-{seq // 3}"
        items = [tool("read_file"), tool("grep"), system(f"You are {agent}."), message(seq)]
        return call(seq, items, agent=agent, tool_calls=[{"name": "grep", "id": f"c{seq}"}])

    _, state = analyse([subagent_call(seq) for seq in range(1, 101)])
    size_100 = len(json.dumps(state))
    _, state = analyse([subagent_call(seq) for seq in range(101, 501)], state)

    assert len(json.dumps(state)) <= size_100 * 1.05
    assert len(state["lanes"]) <= DEFAULT_CONFIG.agents_kept
    assert len(state["recent"]) <= DEFAULT_CONFIG.agents_kept * DEFAULT_CONFIG.recent_calls
    assert state["retired"]["agents"] == 500 // 3 + 1 - DEFAULT_CONFIG.agents_kept


def test_an_agent_name_from_a_trace_is_kept_short():
    stored = {"seq": 1, "start_ns": T0, "model": "gpt-4o", "agent": "x" * 10_000}
    assert len(CallInput.from_dict(stored).agent) == 200
    assert CallInput.from_dict({**stored, "agent": ""}).agent is None
