from ingest.turns import TurnState, advance


def numbered(calls):
    state = TurnState()
    out = []
    for call in calls:
        state = advance(state, **call)
        out.append((state.seq, state.turn))
    return out


def call(fingerprint=None, invocation=None, trace_id="t1", turn_hint=None):
    return {
        "fingerprint": fingerprint,
        "invocation": invocation,
        "trace_id": trace_id,
        "turn_hint": turn_hint,
    }


def test_a_new_user_message_starts_a_turn_and_tool_loops_do_not():
    calls = [call("u1"), call("u1"), call("u1"), call("u2"), call("u2"), call("u3")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 3)]


def test_a_new_agent_invocation_starts_a_turn():
    calls = [call(invocation="a"), call(invocation="a"), call(invocation="b")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 2)]


def test_both_signals_at_once_start_one_turn():
    calls = [call("u1", "a"), call("u2", "b")]
    assert numbered(calls) == [(1, 1), (2, 2)]


def test_the_senders_turn_wins():
    calls = [call("u1", turn_hint=5), call("u2", turn_hint=5), call("u3", turn_hint=7)]
    assert numbered(calls) == [(1, 5), (2, 5), (3, 7)]


def test_without_content_or_agents_a_new_trace_starts_a_turn():
    calls = [call(trace_id="t1"), call(trace_id="t1"), call(trace_id="t2")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 2)]


def test_a_call_without_content_between_two_keeps_comparing_with_the_last_known_message():
    calls = [call("u1"), call(None, trace_id="t2"), call("u1"), call("u2")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 1), (4, 2)]


def test_one_user_message_handed_from_agent_to_agent_is_one_turn():
    """A handoff between top-level agents (issue 33): the same user message, so the same turn."""
    calls = [call("u1", "triage"), call("u1", "triage"), call("u1", "billing"), call("u1", "billing")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 1), (4, 1)]


def test_a_handoff_with_a_new_user_message_starts_a_turn():
    calls = [call("u1", "triage"), call("u1", "billing"), call("u2", "billing"), call("u2", "triage")]
    assert numbered(calls) == [(1, 1), (2, 1), (3, 2), (4, 2)]


def test_a_switch_of_agent_whose_user_message_is_unknown_starts_a_turn():
    calls = [call("u1", "triage"), call(None, "billing"), call(None, "billing")]
    assert numbered(calls) == [(1, 1), (2, 2), (3, 2)]
