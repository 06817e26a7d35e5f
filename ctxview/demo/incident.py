"""Story 1, "incident at turn 40": an on-call agent whose sliding window drops a fact it still needs.

It follows the experiment of ../shared/seeds/004 (issue 16): 40 turns, 57 calls, 12 tools, 5 of them
never called (search_logs among them). The window keeps the last 12 messages (tool calls and results
count as messages). The standing rule of turn 2 (file tickets under employee 4417) is a user message:
it leaves the window, and its employee number survives only because the agent repeats it every 7
turns. The fact of turn 19 is stated by the user (the payments team's confirmation, relayed: the
affected shard is pay-shard-7), once, and the window drops it at turn 23. The agent calls `read_log`,
which does not exist, three times; a coffee break before turn 25 lets the cache expire.
"""

import random
from datetime import UTC, datetime, timedelta

from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import log_lines, prose, tool_definition

RUN_ID = "demo-incident-turn-40"
SERVICE = "oncall-agent"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 24, 2, 10, tzinfo=UTC)
WINDOW_MESSAGES = 12  # the sliding window keeps the last 12 messages
REPEAT_RULE_EVERY = 7  # the agent restates the standing rule in its answer every 7 turns
# Texts followed through the replay besides the run's fact and rule items (the demo command adds them).
PROBE_TEXTS = ("pay-shard-7", "employee 4417")

CALLED = (
    "query_metrics",
    "list_alerts",
    "get_deploys",
    "read_runbook",
    "get_shard_status",
    "create_ticket",
    "restart_service",
)
NEVER_CALLED = ("search_logs", "scale_service", "rollback_deploy", "page_oncall", "run_sql")
# Turns where the agent uses a tool (two calls: the tool request, then the answer); read_log does not exist.
TOOL_TURNS = {
    1: "query_metrics",
    3: "list_alerts",
    4: "get_deploys",
    5: "query_metrics",
    7: "read_runbook",
    9: "query_metrics",
    11: "get_deploys",
    13: "list_alerts",
    15: "query_metrics",
    17: "read_runbook",
    19: "get_shard_status",
    21: "query_metrics",
    23: "restart_service",
    26: "query_metrics",
    33: "read_log",
    35: "read_log",
    38: "read_log",
}
FACT_TURN = 19
RULE_TURN = 2


def _tools(rng: random.Random) -> list[Piece]:
    parameters = {"service": {"type": "string"}, "window": {"type": "string"}, "limit": {"type": "integer"}}
    return [
        Piece(
            f"tool:{name}",
            "tool",
            "tools",
            tool_definition(rng, name, parameters, sentences=16),
            trust="system",
        )
        for name in (*CALLED, *NEVER_CALLED)
    ]


def _turn_messages(rng: random.Random, turn: int) -> list[Piece]:
    """The messages a turn adds to the conversation (its user message, tool exchange, answer)."""
    user_id, kind = f"msg:t{turn}:user", "message"
    if turn == RULE_TURN:
        user_id, kind = "rule:ticket-owner", "rule"
        user = "From now on, file every ticket under employee 4417. This is a standing rule."
    elif turn == FACT_TURN:
        user_id, kind = "fact:affected-shard", "fact"
        user = (
            "Confirmed: the affected shard is pay-shard-7 (queue depth 9120, p99 4.2 s). "
            "The payments team just told me; check its status."
        )
    elif turn == 40:
        user = "Latency is back. File a ticket for the affected shard and restart its worker pool."
    else:
        user = f"Turn {turn}: " + prose(rng, 2)
    pieces = [Piece(user_id, kind, "conversation", user, role="user", trust="user", origin_turn=turn)]
    tool = TOOL_TURNS.get(turn)
    if tool:
        pieces.append(
            Piece(
                f"msg:t{turn}:call",
                "message",
                "conversation",
                f"Calling {tool}.",
                role="assistant",
                origin_turn=turn,
            )
        )
        if tool == "read_log":
            result = "error: unknown tool 'read_log'"
        elif tool == "get_shard_status":
            # The status names no shard: the user's message is the only place the fact is stated.
            result = "state=DEGRADED p99_ms=4210 queue_depth=9120\n" + log_lines(rng, 40, "shardd")
        else:
            result = log_lines(rng, 26, "pay-api")
        pieces.append(
            Piece(
                f"result:t{turn}",
                "tool_result",
                "tool_results",
                result,
                role="user",
                trust="tool",
                source=tool,
                origin_turn=turn,
            )
        )
    answer = prose(rng, 3)
    if turn > RULE_TURN and turn % REPEAT_RULE_EVERY == 2:
        answer += " As the standing rule says, tickets go under employee 4417."
    pieces.append(
        Piece(
            f"msg:t{turn}:answer",
            "message",
            "conversation",
            answer,
            role="assistant",
            origin_turn=turn,
        )
    )
    return pieces


def record() -> Recorder:
    rng = random.Random(40)
    recorder = Recorder(RUN_ID, MODEL)
    tools = _tools(rng)
    system = Piece(
        "system:prompt",
        "system",
        "system",
        "You are the on-call assistant of the payments team. " + prose(rng, 45),
        role="system",
        trust="system",
    )
    # The agent's notes on the service: memory, which every window keeps.
    memory = Piece(
        "memory:oncall-notes",
        "memory",
        "memory",
        "On-call notes for pay-api: " + prose(rng, 6),
        role="user",
        trust="system",
    )
    history: list[Piece] = []
    at = START
    for turn in range(1, 41):
        at += timedelta(minutes=7 if turn == 25 else 2, seconds=rng.randint(0, 40))  # a break before turn 25
        pieces = _turn_messages(rng, turn)
        tool = TOOL_TURNS.get(turn)
        if tool:
            # First call: the window up to the user's message; the model asks for the tool.
            history.append(pieces[0])
            recorder.call(
                turn, at, *_window(tools, system, memory, history), tool_calls=[tool], output_tokens=60
            )
            at += timedelta(seconds=25)
            history += pieces[1:-1]
        else:
            history.append(pieces[0])
        recorder.call(
            turn,
            at,
            *_window(tools, system, memory, history),
            tool_calls=["create_ticket"] if turn == 40 else [],
            output_tokens=240,
        )
        history.append(pieces[-1])  # the answer, which the next call's window holds
    return recorder


def _window(tools: list[Piece], system: Piece, memory: Piece, history: list[Piece]) -> tuple[list, list]:
    """The pieces a call sends (the head and the last messages) and the messages it leaves out."""
    kept, dropped = history[-WINDOW_MESSAGES:], history[:-WINDOW_MESSAGES]
    excluded = [{"id": piece.id, "reason": "sliding_window", "kind": piece.kind} for piece in dropped]
    return [*tools, system, memory, *kept], excluded
