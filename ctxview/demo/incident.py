"""Story 1, "incident at turn 40": an on-call agent whose sliding window drops a fact it still needs.

40 turns, 57 calls. 12 tools, 5 of them never called (search_logs among them). A standing rule at
turn 2 (file tickets under employee 4417) is pinned and survives; the fact found at turn 19 (the
affected shard is pay-shard-7) leaves the window at turn 31, excluded by the sliding window. Tool
results outgrow the tool catalogue at turn 5. The agent calls `read_log`, which does not exist,
three times; a coffee break before turn 25 lets the cache expire.
"""

import random
from datetime import UTC, datetime, timedelta

from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import log_lines, prose, tool_definition

RUN_ID = "demo-incident-turn-40"
SERVICE = "oncall-agent"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 24, 2, 10, tzinfo=UTC)
WINDOW_TURNS = 12  # the sliding window keeps the messages of the last 12 turns

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
    if turn == RULE_TURN:
        user = "From now on, file every ticket under employee 4417. This is a standing rule."
    elif turn == FACT_TURN:
        user = "Which shard is affected? Check the shard status."
    elif turn == 40:
        user = "Latency is back. File a ticket for the affected shard and restart its worker pool."
    else:
        user = f"Turn {turn}: " + prose(rng, 2)
    pieces = [
        Piece(
            f"msg:t{turn}:user", "message", "conversation", user, role="user", trust="user", origin_turn=turn
        )
    ]
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
            result = "shard=pay-shard-7 state=DEGRADED p99_ms=4210 queue_depth=9120\n" + log_lines(
                rng, 40, "shardd"
            )
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
    if turn == FACT_TURN:
        pieces.append(
            Piece(
                "fact:affected-shard",
                "fact",
                "conversation",
                "Confirmed: the affected shard is pay-shard-7 (queue depth 9120, p99 4.2 s).",
                role="assistant",
                origin_turn=turn,
            )
        )
    pieces.append(
        Piece(
            f"msg:t{turn}:answer",
            "message",
            "conversation",
            prose(rng, 3),
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
    rule = Piece(
        "rule:ticket-owner",
        "rule",
        "memory",
        "Standing rule from the user: file every ticket under employee 4417.",
        role="user",
        trust="user",
        pinned=True,
        origin_turn=RULE_TURN,
    )
    turns: dict[int, list[Piece]] = {}
    at = START
    for turn in range(1, 41):
        at += timedelta(minutes=7 if turn == 25 else 2, seconds=rng.randint(0, 40))  # a break before turn 25
        turns[turn] = _turn_messages(rng, turn)
        first_kept = max(1, turn - WINDOW_TURNS + 1)
        excluded = [
            {"id": piece.id, "reason": "sliding_window", "kind": piece.kind}
            for old in range(1, first_kept)
            for piece in turns[old]
        ]
        kept = [piece for number in range(first_kept, turn + 1) for piece in turns[number]]
        memory = [rule] if turn >= RULE_TURN else []
        tool = TOOL_TURNS.get(turn)
        if tool:
            # First call: the window up to the user's message; the model asks for the tool.
            before_tool = kept[: kept.index(turns[turn][0]) + 1]
            recorder.call(
                turn,
                at,
                [*tools, system, *memory, *before_tool],
                excluded,
                tool_calls=[tool],
                output_tokens=60,
            )
            at += timedelta(seconds=25)
        answer_window = [piece for piece in kept if piece.id != f"msg:t{turn}:answer"]
        recorder.call(
            turn,
            at,
            [*tools, system, *memory, *answer_window],
            excluded,
            tool_calls=["create_ticket"] if turn == 40 else [],
            output_tokens=240,
        )
    return recorder
