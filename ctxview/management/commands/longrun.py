"""Generate a long agent run (1,000 calls by default) and send it through the SDK and the real OTLP path.

For trying the UI and measuring it on a run far longer than the demo's: a coding agent that works for
``calls / 4`` turns (a user message, three tool round-trips, an answer), keeps the last 10 turns of
history (a sliding window), learns a fact every 20 turns (which later slides out), keeps a pinned rule,
writes a checkpoint summary every 50 turns, and pauses past the cache lifetime every 100 calls.

    python manage.py longrun --url http://127.0.0.1:8000 --key cvk_... [--calls 1000] [--run-id long-1000]
"""

import random
from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError

import ctxview_sdk
from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import log_lines, prose, tool_definition

SERVICE = "long-agent"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
WINDOW_TURNS = 10
TOOLS = (
    "read_file",
    "write_file",
    "run_tests",
    "grep",
    "list_dir",
    "git_diff",
    "git_log",
    "search",
    "lint",
    "fmt",
)


def record(calls: int = 1000, run_id: str | None = None) -> Recorder:
    """Record the run's calls through the configured SDK; returns the recorder (``.calls`` sent)."""
    rng = random.Random(calls)
    recorder = Recorder(run_id or f"long-run-{calls}", MODEL)
    parameters = {"path": {"type": "string"}, "pattern": {"type": "string"}}
    tools = [
        Piece(f"tool:{name}", "tool", "tools", tool_definition(rng, name, parameters), trust="system")
        for name in TOOLS
    ]
    system = Piece(
        "system:prompt", "system", "system", "You are a coding agent. " + prose(rng, 30), role="system"
    )
    rule = Piece(
        "rule:no-force-push",
        "rule",
        "memory",
        "Standing rule: never force-push to main.",
        role="user",
        trust="user",
        pinned=True,
        origin_turn=1,
    )
    turns: dict[int, list[Piece]] = {}
    summaries: list[Piece] = []
    at = START
    turn = 0
    sent = 0
    while sent < calls:
        turn += 1
        pieces = [
            Piece(
                f"msg:t{turn}:user", "message", "conversation", f"Turn {turn}: " + prose(rng, 1), role="user"
            )
        ]
        turns[turn] = pieces
        if turn % 20 == 0:
            pieces.append(
                Piece(
                    f"fact:t{turn}",
                    "fact",
                    "conversation",
                    f"Fact learned at turn {turn}: module m{turn} owns table t{turn}.",
                    role="assistant",
                    origin_turn=turn,
                )
            )
        if turn % 50 == 0:
            summaries.append(
                Piece(
                    f"summary:checkpoint-{turn // 50}",
                    "summary",
                    "summary",
                    f"Checkpoint after turn {turn}: " + prose(rng, 4),
                    role="user",
                    mode="summary",
                    origin_turn=turn,
                )
            )
        first_kept = max(1, turn - WINDOW_TURNS + 1)
        # Only the latest departures are listed as exclusions (a builder reports what it just dropped).
        excluded = [
            {"id": piece.id, "reason": "sliding_window", "kind": piece.kind}
            for old in range(max(1, first_kept - 2), first_kept)
            for piece in turns.get(old, ())
        ]
        for step in range(4):
            if sent >= calls:
                break
            if sent and sent % 100 == 0:
                at += timedelta(minutes=7)  # past the cache lifetime
            at += timedelta(seconds=rng.randint(8, 30))
            kept = [piece for number in range(first_kept, turn + 1) for piece in turns[number]]
            tool = TOOLS[(turn + step) % len(TOOLS)] if step < 3 else None
            recorder.call(
                turn,
                at,
                [*tools, system, rule, *summaries, *kept],
                excluded,
                tool_calls=[tool] if tool else [],
                output_tokens=120,
            )
            sent += 1
            if sent % 200 == 0:
                ctxview_sdk.flush(timeout=600.0)  # the SDK's queue is bounded (1,024 spans)
            if tool:
                pieces.append(
                    Piece(
                        f"msg:t{turn}:call{step}",
                        "message",
                        "conversation",
                        f"Calling {tool}.",
                        role="assistant",
                        origin_turn=turn,
                    )
                )
                pieces.append(
                    Piece(
                        f"result:t{turn}:{step}",
                        "tool_result",
                        "tool_results",
                        log_lines(rng, 8, tool),
                        role="user",
                        trust="tool",
                        source=tool,
                        origin_turn=turn,
                    )
                )
            else:
                pieces.append(
                    Piece(f"msg:t{turn}:answer", "message", "conversation", prose(rng, 2), role="assistant")
                )
    return recorder


class Command(BaseCommand):
    help = "Send a generated long run (default 1,000 calls) to a ctxview server through the SDK."

    def add_arguments(self, parser):
        parser.add_argument("--url", required=True, help="the ctxview server, e.g. http://127.0.0.1:8000")
        parser.add_argument("--key", required=True, help="an ingest key of the target project")
        parser.add_argument("--calls", type=int, default=1000)
        parser.add_argument("--run-id", help="the run's id (default long-run-<calls>)")

    def handle(self, *args, url: str, key: str, calls: int, run_id: str | None, **options):
        if calls < 1:
            raise CommandError("--calls must be at least 1")
        ctxview_sdk.configure(url, key=key, service_name=SERVICE, send_content=True, timeout=60.0)
        recorder = record(calls, run_id)
        if not ctxview_sdk.flush(timeout=600.0):
            raise CommandError(f"the run could not be delivered to {url}")
        ctxview_sdk.shutdown(timeout=30.0)
        self.stdout.write(f"sent the run {recorder.run_id}: {recorder.calls} calls")
