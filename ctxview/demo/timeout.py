"""Story 3, "order-service timeout": a debugging agent whose window drifts away from its constraints.

10 turns. The plan is revised at turn 4 while the old plan stays in the window. A 40K-token log is
written out as an artifact and referenced instead of inlined. At turn 6 a compaction replaces turns
1-4 with a checkpoint summary (the replaced items are excluded as `compacted`). The pinned constraint
"do not change the public API" ends up in the middle of a long window.
"""

import random
from datetime import UTC, datetime, timedelta

from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import code, log_lines, prose, tool_definition

RUN_ID = "demo-order-service-timeout"
SERVICE = "debug-agent"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 26, 9, 45, tzinfo=UTC)
COMPACTION_TURN = 6
LOG_TOKENS = 40_312
TOOLS = ("search_artifact", "read_file", "query_traces", "run_load_test", "list_endpoints")


def record() -> Recorder:
    rng = random.Random(6)
    recorder = Recorder(RUN_ID, MODEL)
    parameters = {"query": {"type": "string"}, "limit": {"type": "integer"}}
    tools = [
        Piece(f"tool:{name}", "tool", "tools", tool_definition(rng, name, parameters), trust="system")
        for name in TOOLS
    ]
    system = Piece(
        "system:prompt",
        "system",
        "system",
        "You debug production incidents of the order service. " + prose(rng, 30),
        role="system",
        trust="system",
    )
    constraint = Piece(
        "rule:public-api",
        "rule",
        "memory",
        "Constraint: do not change the public API of order-service (routes, request and response shapes).",
        role="user",
        trust="user",
        pinned=True,
        origin_turn=1,
    )
    plan_v1 = Piece(
        "plan@v1",
        "plan",
        "memory",
        "Plan: 1. check the database pool. 2. check recent deploys. 3. load test the checkout route.",
        role="assistant",
        version="v1",
        source="plan.md",
        origin_turn=1,
    )
    plan_v2 = Piece(
        "plan@v2",
        "plan",
        "memory",
        "Revised plan: the pool is fine; the timeouts follow the "
        "payments client's new retry policy. 1. read client config. 2. reproduce. 3. fix retries.",
        role="assistant",
        version="v2",
        source="plan.md",
        supersedes=("plan@v1",),
        origin_turn=4,
    )
    artifact = Piece(
        "artifact:order-service-0940.log",
        "artifact_ref",
        "tool_results",
        f"The service log since 09:40 ({LOG_TOKENS:,} tokens) was saved to "
        "artifacts/order-service-0940.log; search it with search_artifact.",
        role="user",
        mode="reference",
        source="artifacts/order-service-0940.log",
        trust="tool",
        origin_turn=2,
    )
    files = [
        Piece(
            f"file:{path}",
            "file",
            "retrieved",
            code(rng, 56, path),
            role="user",
            version="main",
            source=path,
            trust="tool",
            origin_turn=turn,
        )
        for path, turn in (
            ("src/db/pool.ts", 2),
            ("src/clients/payments.ts", 5),
            ("src/routes/checkout.ts", 5),
            ("src/config/retry.ts", 7),
            ("src/clients/retry_policy.ts", 8),
        )
    ]
    summary = Piece(
        "summary:checkpoint-1",
        "summary",
        "summary",
        "Checkpoint after turns 1-4: timeouts began "
        "at 09:40 after deploy 4711; the database pool is healthy; suspect the payments client's "
        "retry policy. " + prose(rng, 6),
        role="user",
        mode="summary",
        origin_turn=COMPACTION_TURN,
    )

    conversation: list[Piece] = []
    at = START
    for turn in range(1, 11):
        at += timedelta(minutes=3, seconds=rng.randint(0, 50))
        conversation.append(
            Piece(
                f"msg:t{turn}:user",
                "message",
                "conversation",
                prose(rng, 2),
                role="user",
                trust="user",
                origin_turn=turn,
            )
        )
        for step in range(1, 4 if turn in (2, 5, 7, 8) else 3):
            plans = [plan_v1, plan_v2] if turn >= 4 else [plan_v1]
            if turn < COMPACTION_TURN:
                window = [*tools, system, constraint, *plans]
                if turn >= 2:
                    window.append(artifact)
                window += [f for f in files if f.origin_turn <= turn] + conversation
                excluded = (
                    [
                        {
                            "id": "log:order-service-0940",
                            "reason": "budget",
                            "tokens": LOG_TOKENS,
                            "kind": "log",
                            "source": "logs/order-service",
                        }
                    ]
                    if turn >= 2
                    else []
                )
            else:
                # After the compaction: the summary replaces turns 1-4; retrieved code piles up around the
                # constraint, which ends up in the middle of the window.
                early = [f for f in files if f.origin_turn <= turn][:3]
                late = [f for f in files if f.origin_turn <= turn][3:]
                replaced = [piece for piece in conversation if piece.origin_turn < COMPACTION_TURN - 1]
                recent = [piece for piece in conversation if piece.origin_turn >= COMPACTION_TURN - 1]
                window = [
                    *tools,
                    system,
                    summary,
                    *early,
                    artifact,
                    *plans,
                    constraint,
                    Piece(
                        f"log:excerpt-{turn}",
                        "tool_result",
                        "tool_results",
                        log_lines(rng, 90, "order-service"),
                        role="user",
                        mode="excerpt",
                        source="artifacts/order-service-0940.log",
                        trust="tool",
                        origin_turn=turn,
                    ),
                    *late,
                    *recent,
                ]
                excluded = [{"id": piece.id, "reason": "compacted", "kind": piece.kind} for piece in replaced]
                excluded.append(
                    {
                        "id": "log:order-service-0940",
                        "reason": "budget",
                        "tokens": LOG_TOKENS,
                        "kind": "log",
                        "source": "logs/order-service",
                    }
                )
            last_step = step == (3 if turn in (2, 5, 7, 8) else 2)
            recorder.call(
                turn,
                at,
                window,
                excluded,
                tool_calls=[] if last_step else [rng.choice(TOOLS)],
                output_tokens=220,
            )
            at += timedelta(seconds=30)
            conversation.append(
                Piece(
                    f"msg:t{turn}:s{step}",
                    "message",
                    "conversation",
                    prose(rng, 2),
                    role="assistant",
                    origin_turn=turn,
                )
            )
    return recorder
