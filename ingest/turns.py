"""Call order and turn numbers within a run. No Django here.

A turn is one user-visible step: a user message and everything the agent did until it answered.
``ctxview.turn`` wins when the sender gives it; otherwise a new user message in the input (one that
only carries tool results is not new) starts a turn. A switch to another top-level agent invocation (a
handoff, however the framework marks it) starts one only when the user message is unknown: the same user
message handed from agent to agent is one turn (issue 33). When neither is known (no content captured,
no agent spans), a new trace starts one.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class TurnState:
    """What the next call's numbering depends on: the carried state after a call."""

    seq: int = 0
    turn: int = 0
    fingerprint: str | None = None  # the last user message that was not only tool results
    invocation: str | None = None  # the agent invocation span the last call ran under
    trace_id: str | None = None


def advance(
    state: TurnState,
    *,
    turn_hint: int | None,
    fingerprint: str | None,
    invocation: str | None,
    trace_id: str,
) -> TurnState:
    """The state after the next call of the run; its ``seq`` and ``turn`` are that call's."""
    if turn_hint is not None and turn_hint >= 1:
        turn = turn_hint
    elif state.seq == 0:
        turn = 1
    elif fingerprint and state.fingerprint and fingerprint != state.fingerprint:
        turn = state.turn + 1
    elif invocation and state.invocation and invocation != state.invocation and not fingerprint:
        turn = state.turn + 1  # another agent, and nothing says the user's message is the same one
    elif (
        not (fingerprint or invocation or state.fingerprint or state.invocation)
        and trace_id != state.trace_id
    ):
        turn = state.turn + 1
    else:
        turn = state.turn
    return TurnState(
        seq=state.seq + 1,
        turn=turn,
        fingerprint=fingerprint or state.fingerprint,
        invocation=invocation or state.invocation,
        trace_id=trace_id,
    )
