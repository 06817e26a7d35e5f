"""Analysis benchmark: one synthetic run of 2,000 calls, analysed call by call from the carried state.

    .venv/bin/python bench/analysis.py                 # 2,000 calls
    .venv/bin/python bench/analysis.py --calls 5000

The history grows by a user message, an assistant reply and a tool result per call; when it passes the
budget, the oldest tenth is dropped (a sliding window), so the window is full-sized from about call 80.
Per-call time: the 20 calls up to call 100 and up to the last call are analysed again from their stored
states, 7 times each, the two points alternating (so the machine's drift hits both alike); the median.
"With state I/O" adds the JSON load and dump of the state, as the task storing it would.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ctxcore.analysis import CallInput, analyse_call, finalise_run, new_state  # noqa: E402
from ctxcore.vocabulary import digest  # noqa: E402

SECOND = 10**9
BUDGET_TOKENS = 60_000


def item(item_id: str, bucket: str, tokens: int, **fields) -> dict:
    return {"id": item_id, "kind": fields.pop("kind", "message"), "bucket": bucket, "tokens": tokens,
            "hash": digest(item_id), **fields}  # fmt: skip


def synthetic_calls(count: int):
    """The run's calls, built one at a time (building is not timed)."""
    tools = [item(f"tool:tool_{number}", "tools", 150, kind="tool") for number in range(12)]
    head = [
        *tools,
        item("system:0", "system", 1500, kind="system"),
        item("rule-4417", "memory", 40, kind="rule", pinned=True),
    ]
    history: list[dict] = []
    previous_total = 0
    for seq in range(1, count + 1):
        history += [
            item(f"user-{seq}", "conversation", 120),
            item(f"assistant-{seq}", "conversation", 180),
            item(f"result-{seq}", "tool_results", 400, kind="tool_result"),
        ]
        dropped = False
        while sum(entry["tokens"] for entry in history) > BUDGET_TOKENS:
            history = history[len(history) // 10 :]
            dropped = True
        version = str(seq // 50)
        items = [
            *head,
            item(f"file-{version}", "retrieved", 600, source="src/app.py", version=version),
            *history,
        ]
        total = sum(entry["tokens"] for entry in items)
        read = 0 if dropped else min(previous_total, total)
        start = (1_764_000_000 + 15 * seq) * SECOND
        yield CallInput.from_dict(
            {
                "seq": seq,
                "turn": seq,
                "start_ns": start,
                "end_ns": start + 3 * SECOND,
                "model": "claude-sonnet-4-5-20250929",
                "provider": "anthropic",
                "usage": {
                    "uncached": 0,
                    "cache_write": total - read,
                    "cache_read": read,
                    "output": 300,
                    "reasoning": None,
                    "prompt_total": total,
                },
                "items": items,
                "manifest_source": "explicit",
                "budget": {"limit": 200_000, "input": total, "reserved_output": 8_000},
                "tool_calls": [{"name": f"tool_{seq % 7}", "id": f"call-{seq}"}],
                "tool_definitions": [entry["id"][5:] for entry in tools],
            }
        )
        previous_total = total


WINDOW = 20  # calls timed around each point
ROUNDS = 7  # times each of them is analysed again


def retime(snapshots: dict[int, tuple[str, CallInput]], points: tuple[int, int]) -> dict[int, dict]:
    """Analyse each snapshotted call again from its stored state, ROUNDS times, the calls around the two
    points alternating: a machine that speeds up or slows down during the run hits both points alike."""
    analysis: dict[int, list[float]] = {point: [] for point in points}
    with_io: dict[int, list[float]] = {point: [] for point in points}
    windows = [[seq for seq in range(point - WINDOW + 1, point + 1) if seq in snapshots] for point in points]
    for _ in range(ROUNDS):
        for pair in zip(*windows, strict=True):
            for point, seq in zip(points, pair, strict=True):
                stored, call = snapshots[seq]
                started = time.perf_counter()
                state = json.loads(stored)
                loaded = time.perf_counter()
                _, state = analyse_call(state, call)
                analysed = time.perf_counter()
                json.dumps(state)
                finished = time.perf_counter()
                analysis[point].append(analysed - loaded)
                with_io[point].append(finished - started)
    return {
        point: {
            "analysis_ms": statistics.median(analysis[point]) * 1000,
            "with_state_io_ms": statistics.median(with_io[point]) * 1000,
        }
        for point in points
    }


def measure(calls: int) -> dict:
    """Analyse a synthetic run of ``calls`` calls; per-call times around call 100 and the last call."""
    points = (100, calls)
    wanted = {seq for point in points for seq in range(point - WINDOW + 1, point + 1)}
    state = new_state()
    stored = json.dumps(state)
    snapshots: dict[int, tuple[str, CallInput]] = {}
    elapsed = 0.0
    sizes: dict[int, tuple[int, int, int]] = {}
    findings = 0
    for call in synthetic_calls(calls):
        if call.seq in wanted:
            snapshots[call.seq] = (stored, call)  # the state before the call, as the task stores it
        started = time.perf_counter()
        analysis, state = analyse_call(state, call)
        elapsed += time.perf_counter() - started
        stored = json.dumps(state)
        sizes[call.seq] = (len(call.items), analysis.buckets["total"], len(stored))
        findings += len(analysis.findings)
    run = finalise_run(state)
    timed = retime(snapshots, points)
    return {
        "calls": calls,
        "findings": findings,
        "run_findings": len(run["findings"]),
        "points": {
            seq: {
                **timed[seq],
                "items": sizes[seq][0],
                "tokens": sizes[seq][1],
                "state_bytes": sizes[seq][2],
            }
            for seq in points
        },
        "calls_per_second": calls / elapsed,
        "cache_breaks": run["accounting"]["cache_breaks"]["count"],
        "cache_hit_rate": run["accounting"]["cache_hit_rate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    result = measure(arguments.calls)
    if arguments.json:
        print(json.dumps(result))
        return
    last = arguments.calls
    findings, run_findings = result["findings"], result["run_findings"]
    print(f"calls analysed: {last}, findings: {findings} per call + {run_findings} run-level")
    for label, seq in (("call 100", 100), (f"call {last}", last)):
        point = result["points"][seq]
        print(
            f"{label:>10}: {point['analysis_ms']:.3f} ms analysis, "
            f"{point['with_state_io_ms']:.3f} ms with state I/O "
            f"(window {point['items']} items / {point['tokens']} tokens, "
            f"state {point['state_bytes'] / 1024:.0f} KiB)"
        )
    first, final = result["points"][100], result["points"][last]
    ratio = final["analysis_ms"] / first["analysis_ms"]
    ratio_io = final["with_state_io_ms"] / first["with_state_io_ms"]
    print(f"ratio call {last} / call 100: {ratio:.2f} (analysis), {ratio_io:.2f} (with state I/O)")
    print(f"throughput over the whole run: {result['calls_per_second']:.0f} calls/s (analysis only)")
    print(f"cache breaks: {result['cache_breaks']}, hit rate: {result['cache_hit_rate']}")


if __name__ == "__main__":
    main()
