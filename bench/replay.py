"""Replay benchmark: the policy replay (ctxcore.replay) on the demo incident (57 calls) and on the shape
of the suite's 1,000-call run, with 250 to 2,000 calls to show how it grows.

    .venv/bin/python bench/replay.py                  # the table for the README
    .venv/bin/python bench/replay.py --repeat 3

The runs are built in memory, as the analyses read them (items with token counts and content hashes):
the incident through its story module (the same windows the demo sends); the long run (250 to 2,000
calls, ``--calls``) like bench/payloads.build_run(calls, window=40): a system prompt, 12 tools and the
last 40 user messages of ~60 words, one call a second (so the cache never expires), every call asking
for caching. Timed: the replay of every policy in one pass (pure Python, no database), in CPU time of
this process (the machine's other work does not count), the median of ``--repeat`` runs.
"items in windows" is what the replayed windows hold, summed over the calls: the work does not grow
with it, but with what changes in each window from one call to the next.
"""

import argparse
import random
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# ctxview/__init__.py starts the Celery app (and Django); the replay needs neither.
_package = types.ModuleType("ctxview")
_package.__path__ = [str(ROOT / "ctxview")]
sys.modules.setdefault("ctxview", _package)

from ctxcore.analysis import CallInput  # noqa: E402
from ctxcore.replay import Probe, parse_list, replay  # noqa: E402
from ctxcore.vocabulary import digest  # noqa: E402

SECOND = 10**9
POLICIES = "recorded,full,sliding_window:12,user_verbatim:4,elide:4,pin_end,compaction:10:2000,turns:17-19"
WINDOWED = "recorded,sliding_window:12,last_turns:4"


def _count(text: str) -> int:
    from ingest import tokens

    return tokens.count(text)


def incident_calls() -> list[CallInput]:
    """The demo incident's 57 calls, as its story builds them."""
    from ctxview.demo import incident, recorder
    from ctxview_sdk import render

    calls: list[CallInput] = []

    def call(self, turn, at, pieces, excluded=(), tool_calls=(), output_tokens=200, prompt_version="v1"):
        self.calls += 1
        items = []
        for piece in pieces:
            text = render(piece.content)
            items.append(
                {"id": piece.id, "kind": piece.kind, "bucket": piece.bucket, "hash": digest(text),
                 "tokens": _count(text), "role": piece.role, "origin_turn": piece.origin_turn}
            )  # fmt: skip
        start = int(at.timestamp()) * SECOND
        total = sum(item["tokens"] for item in items)
        calls.append(
            CallInput.from_dict(
                {
                    "seq": self.calls,
                    "turn": turn,
                    "start_ns": start,
                    "end_ns": start + 4 * SECOND,
                    "model": self.model,
                    "provider": "anthropic",
                    "items": items,
                    "excluded": list(excluded),
                    "usage": {"prompt_total": total, "cache_write": 1, "output": output_tokens},
                }
            )  # fmt: skip
        )

    recorder.Recorder.call = call
    incident.record()
    return calls


def long_calls(count: int, window: int = 40, seed: int = 7) -> list[CallInput]:
    """The shape of bench/payloads.build_run(count, window=40): derived items, content-hash ids."""
    rng = random.Random(seed)
    words = "shard latency payment retry queue worker deploy config timeout ledger invoice cache".split()
    head = []
    for number in range(12):
        text = " ".join(rng.choices(words, k=30))
        head.append({"id": f"tool:tool_{number}", "kind": "tool", "bucket": "tools", "hash": digest(text),
                     "tokens": _count(text)})  # fmt: skip
    system = " ".join(rng.choices(words, k=400))
    head.append({"id": "system:0", "kind": "system", "bucket": "system", "hash": digest(system),
                 "tokens": _count(system)})  # fmt: skip
    history: list[dict] = []
    calls = []
    for seq in range(1, count + 1):
        text = " ".join(rng.choices(words, k=60))
        history.append({"id": f"msg:{digest(text)[:12]}", "kind": "message", "bucket": "conversation",
                        "hash": digest(text), "tokens": _count(text), "role": "user"})  # fmt: skip
        history = history[-window:]
        items = [*head, *history]
        start = 1_700_000_000 * SECOND + seq * SECOND
        total = sum(item["tokens"] for item in items)
        calls.append(
            CallInput.from_dict(
                {
                    "seq": seq,
                    "turn": seq,
                    "start_ns": start,
                    "end_ns": start + 1000,
                    "model": "m1",
                    "provider": "anthropic",
                    "items": items,
                    "usage": {"prompt_total": total, "cache_write": 1, "output": 50},
                }
            )  # fmt: skip
        )
    return calls


def timed(calls: list[CallInput], specs: str, repeat: int) -> tuple[float, dict]:
    policies = parse_list(specs)
    probes = [Probe("item", "fact:affected-shard"), Probe("item", "system:0")]
    times, result = [], {}
    for _ in range(repeat):
        started = time.process_time()
        result = replay(calls, policies, probes)
        times.append(time.process_time() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, nargs="+", default=[250, 500, 1000, 2000])
    args = parser.parse_args()
    print("| run | calls | items in windows | policies | replay (median) | per call and policy |")
    print("|---|---|---|---|---|---|")
    runs = [("demo-incident-turn-40", incident_calls(), (POLICIES, WINDOWED))]
    # Every policy keeps only what changed in its window from call to call, so the time per call and
    # policy stays flat as the run grows, although full, pin_end and elide hold the whole history.
    runs += [("suite shape, window 40", long_calls(count), (POLICIES, WINDOWED)) for count in args.calls]
    for name, calls, sets in runs:
        for specs in sets:
            policies = len(parse_list(specs))
            seconds, result = timed(calls, specs, args.repeat)
            items = sum(row["items"] for entry in result["policies"] for row in entry["per_call"])
            print(
                f"| {name} | {len(calls):,} | {items:,} | {policies} | {seconds * 1000:,.0f} ms "
                f"| {seconds / len(calls) / policies * 1e6:,.0f} µs |"
            )


if __name__ == "__main__":
    main()
