"""Story 2, "migration of 200 files": a coding agent that breaks its own prompt cache twice.

80 calls (steps), three turns. A progress file is rewritten every five steps, each version superseding
the last. `src/api/billing.ts` is read at step 20 and edited at step 45, after which both versions sit
in the window together. From call 30 the system prompt carries the current time: the cache breaks on
every call after it. From call 60 the tool schemas are serialised with unstable key order.
"""

import random
from datetime import UTC, datetime, timedelta

from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import code, prose, tool_definition

RUN_ID = "demo-migration-200-files"
SERVICE = "migration-agent"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 25, 14, 0, tzinfo=UTC)
STEPS = 80
DATE_FROM = 30
KEY_ORDER_FROM = 60
RESULTS_KEPT = 12  # tool results of migrated files leave the window after 12 steps
TOOLS = ("read_file", "write_file", "run_tests", "list_dir", "grep", "update_progress")


def _shuffled(rng: random.Random, value):
    """The same JSON with its keys in another order (what an unordered dict or set serialiser does)."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(rng, value[key]) for key in keys}
    return value


def record() -> Recorder:
    rng = random.Random(200)
    recorder = Recorder(RUN_ID, MODEL)
    parameters = {"path": {"type": "string"}, "content": {"type": "string"}}
    tools = [tool_definition(rng, name, parameters) for name in TOOLS]
    base_prompt = "You migrate the code base from the REST client v1 to v2, file by file. " + prose(rng, 40)
    billing_v1 = code(random.Random(1), 14, "src/api/billing.ts (before the migration)")
    billing_v2 = code(random.Random(2), 14, "src/api/billing.ts (migrated to client v2)")
    instruction = Piece(
        "msg:instruction",
        "message",
        "conversation",
        "Migrate the 200 files under src/ to the v2 client. Keep progress.md up to date.",
        role="user",
        trust="user",
        origin_turn=1,
    )
    history: list[Piece] = [instruction]
    results: list[tuple[int, Piece]] = []
    progress: Piece | None = None
    superseded: list[dict] = []
    dropped: list[dict] = []
    billing: list[Piece] = []
    at = START
    turn = 1
    for step in range(1, STEPS + 1):
        at += timedelta(seconds=rng.randint(20, 50))
        if step in (40, 70):
            turn += 1
            history.append(
                Piece(
                    f"msg:status-{turn}",
                    "message",
                    "conversation",
                    "Status? How many files are done?",
                    role="user",
                    trust="user",
                    origin_turn=turn,
                )
            )
        if step % 5 == 1:
            version = step // 5 + 1
            new = Piece(
                f"progress.md@v{version}",
                "progress",
                "memory",
                f"# Progress\n{min(200, step * 5 // 2)} of 200 files migrated.\n" + prose(rng, 3),
                role="user",
                version=f"v{version}",
                source="progress.md",
                trust="tool",
                supersedes=(progress.id,) if progress else (),
            )
            if progress:
                superseded.append(
                    {
                        "id": progress.id,
                        "reason": "superseded",
                        "source": "progress.md",
                        "version": progress.version,
                    }
                )
            progress = new
        if step == 20:
            billing.append(
                Piece(
                    "file:src/api/billing.ts@v1",
                    "file",
                    "retrieved",
                    billing_v1,
                    role="user",
                    version="v1",
                    source="src/api/billing.ts",
                    trust="tool",
                    origin_turn=turn,
                )
            )
        if step == 45:
            # The agent edits the file and reads it back, but never drops the old copy.
            billing.append(
                Piece(
                    "file:src/api/billing.ts@v2",
                    "file",
                    "retrieved",
                    billing_v2,
                    role="user",
                    version="v2",
                    source="src/api/billing.ts",
                    trust="tool",
                    origin_turn=turn,
                )
            )
        tool = rng.choice(("read_file", "write_file", "run_tests", "grep"))
        result = Piece(
            f"result:step-{step}",
            "tool_result",
            "tool_results",
            code(rng, 3, f"src/{rng.choice(('api', 'lib', 'jobs'))}/file_{step * 5 // 2}.ts"),
            role="user",
            trust="tool",
            source=tool,
            origin_turn=turn,
        )
        results.append((step, result))
        while results and results[0][0] <= step - RESULTS_KEPT:
            old = results.pop(0)[1]
            dropped.append(
                {"id": old.id, "reason": "stage_complete", "kind": "tool_result", "source": old.source}
            )

        prompt = base_prompt
        if step >= DATE_FROM:
            prompt = f"Current date and time: {at.strftime('%Y-%m-%dT%H:%M:%SZ')}.\n" + base_prompt
        tool_json = [_shuffled(rng, tool) for tool in tools] if step >= KEY_ORDER_FROM else tools
        pieces = [
            *(Piece(f"tool:{tool['name']}", "tool", "tools", tool, trust="system") for tool in tool_json),
            Piece("system:prompt", "system", "system", prompt, role="system", trust="system"),
            progress,
            *history,
            *billing,
            *(piece for _, piece in results),
        ]
        recorder.call(
            turn,
            at,
            pieces,
            [*superseded, *dropped],
            tool_calls=[tool],
            output_tokens=180,
            prompt_version="migrate-v3",
        )
    return recorder
