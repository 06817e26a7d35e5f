"""Soak: a steady OTLP/HTTP load for a long time against ctxview on PostgreSQL + Redis + Celery workers
under gunicorn, with figures per minute.

    .venv/bin/python bench/soak.py                       # 10 minutes, 20 spans/s, 4 clients, 2 workers
    .venv/bin/python bench/soak.py --minutes 30 --rate 40 --clients 8 --redis-url redis://127.0.0.1:6379/10

The load is agents that each export one model call at a time: a system prompt, 12 tools and the last
``--window`` messages of a history that grows by a user and an assistant message per call (the shape of
``payloads.build_run``, made lazily here so a long soak does not hold it all in memory). Every POST
carries the next call of ``--agents-per-post`` agents, so runs grow for the whole soak. Each client
thread posts at a fixed pace (the rate is an upper bound: a slow answer delays that client's next post,
it never sends a burst to catch up), to 127.0.0.1 only, and stops when the time is up.

Per minute it reports the receiver's latency (p50/p99 of the POSTs, as the client sees them), the
worker lag (from a call's 200 to its run's analysis covering it; sampled every ``--poll`` seconds, so
that much coarser) and the resident memory of the web (gunicorn) and worker (Celery) processes at the
end of the minute. After the load it waits until everything is analysed and checks that every span
acknowledged is stored exactly once.
"""

import argparse
import hashlib
import json
import math
import random
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from payloads import attribute
from servers import processes, throwaway_ctxview

WORDS = (
    "shard latency payment retry queue worker deploy config timeout ledger invoice cache region "
    "replica rollback canary alert metric budget schema index migration lock batch token"
).split()

# --- The load ------------------------------------------------------------------------------------


def agent_calls(conversation: str, seed: int, window: int) -> Iterator[bytes]:
    """One serialized traces request per call of an agent, without end."""
    rng = random.Random(seed)
    tools = json.dumps(
        [
            {
                "type": "function",
                "name": f"tool_{n}",
                "description": " ".join(rng.choices(WORDS, k=30)),
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            for n in range(12)
        ]
    )
    system = json.dumps([{"type": "text", "content": " ".join(rng.choices(WORDS, k=300))}])
    trace_id = hashlib.sha256(conversation.encode()).digest()[:16]
    history: list[dict] = []
    start = time.time_ns()
    number = 0
    while True:
        number += 1
        history.append(
            {"role": "user", "parts": [{"type": "text", "content": " ".join(rng.choices(WORDS, k=60))}]}
        )
        history = history[-window:]
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.append(attribute("service.name", "soak-agent"))
        span = resource_spans.scope_spans.add().spans.add()
        span.trace_id, span.span_id = trace_id, number.to_bytes(8, "big")
        span.name, span.kind = "chat m1", Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano = start + number * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 500_000
        span.attributes.extend(
            [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.provider.name", "anthropic"),
                attribute("gen_ai.request.model", "m1"),
                attribute("gen_ai.conversation.id", conversation),
                attribute("gen_ai.input.messages", json.dumps(history)),
                attribute("gen_ai.system_instructions", system),
                attribute("gen_ai.tool.definitions", tools),
                attribute("gen_ai.usage.input_tokens", 3000 + 90 * len(history)),
                attribute("gen_ai.usage.cache_read.input_tokens", 2500),
                attribute("gen_ai.usage.output_tokens", 80),
            ]
        )
        yield request.SerializeToString()
        reply = " ".join(rng.choices(WORDS, k=40))
        history.append({"role": "assistant", "parts": [{"type": "text", "content": reply}]})


@dataclass
class Agent:
    """One conversation: its calls, made as they are needed, and how many were acknowledged."""

    key: str
    calls: Iterator[bytes]
    sent: int = 0
    next_call: bytes = b""

    def pending(self) -> bytes:
        """The next call to send; the same one again until it is acknowledged."""
        if not self.next_call:
            self.next_call = next(self.calls)
        return self.next_call

    def acknowledged(self) -> None:
        self.sent += 1
        self.next_call = b""


@dataclass
class Minute:
    posts: int = 0
    spans: int = 0
    failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    latencies: list[float] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    web_mib: float = 0.0
    worker_mib: float = 0.0
    pending_batches: int = 0
    runs_behind: int = 0


class Soak:
    def __init__(self, args: argparse.Namespace, url: str, key: str) -> None:
        self.args = args
        self.url = url
        self.headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"}
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.minutes: dict[int, Minute] = defaultdict(Minute)
        # Per run key: (call number, monotonic time of its 200) not yet seen analysed, in order.
        self.waiting: dict[str, list[tuple[int, float]]] = defaultdict(list)
        self.acked_spans = 0

    def minute(self, at: float | None = None) -> Minute:
        return self.minutes[int(((at or time.monotonic()) - self.started) // 60)]

    def client(self, agents: list[Agent], interval: float) -> None:
        session = requests.Session()
        next_post = time.monotonic()
        turn = 0
        while not self.stop.is_set():
            group = [agents[(turn + i) % len(agents)] for i in range(self.args.agents_per_post)]
            turn += self.args.agents_per_post
            # Concatenated protobuf messages merge: one request with each agent's next call.
            body = b"".join(agent.pending() for agent in group)
            started = time.monotonic()
            try:
                response = session.post(self.url, data=body, headers=self.headers, timeout=60)
                outcome = str(response.status_code)
            except requests.RequestException as exc:
                outcome = type(exc).__name__
            done = time.monotonic()
            with self.lock:
                minute = self.minute(started)
                minute.posts += 1
                minute.latencies.append(done - started)
                if outcome == "200":
                    minute.spans += len(group)
                    self.acked_spans += len(group)
                    for agent in group:
                        agent.acknowledged()
                        self.waiting[agent.key].append((agent.sent, done))
                else:  # not acknowledged: the same calls are sent again next time
                    minute.failures[outcome] += 1
            next_post += interval
            self.stop.wait(max(0.0, next_post - time.monotonic()))

    def observe(self, instance) -> None:
        """Every ``--poll`` seconds: which acknowledged calls are analysed now (their lag)."""
        while True:
            rows = instance.execute("SELECT key, analysed_seq FROM ingest_run")
            now = time.monotonic()
            with self.lock:
                for run_key, analysed_seq in rows:
                    waiting = self.waiting.get(run_key)
                    while waiting and waiting[0][0] <= analysed_seq:
                        _, acked_at = waiting.pop(0)
                        self.minute(acked_at).lags.append(now - acked_at)
                left = sum(map(len, self.waiting.values()))
            if self.stop.is_set() and not left:
                return
            time.sleep(self.args.poll)

    def sample_memory(self, instance) -> None:
        """At the end of each minute: RSS of web and worker processes, backlog."""
        number = 0
        while not self.stop.wait(max(0.0, self.started + 60 * (number + 1) - time.monotonic())):
            self.record_minute(instance, number)
            number += 1

    def record_minute(self, instance, number: int) -> None:
        found = processes(instance.memory_groups())
        web, worker = (
            sum(info.rss_kib for info in found[name].values()) / 1024 for name in ("web", "worker")
        )
        progress = instance.progress()
        with self.lock:
            minute = self.minutes[number]
            minute.web_mib, minute.worker_mib = web, worker
            minute.pending_batches, minute.runs_behind = progress.pending_batches, progress.runs_behind


def build_agents(args: argparse.Namespace) -> list[Agent]:
    prefix = f"soak-{time.time_ns():x}"  # new runs each time, even against a server that is kept
    agents = [
        Agent(f"{prefix}-{number}", agent_calls(f"{prefix}-{number}", number, args.window))
        for number in range(args.clients * args.agents_per_client)
    ]
    size = len(agents[0].pending())
    print(f"load: {len(agents)} agents, about {size / 1024:.1f} KiB per call (protobuf)", flush=True)
    return agents


# --- Report --------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


HEADER = (
    "minute",
    "posts",
    "spans acked",
    "non-200",
    "POST p50/p99 ms",
    "lag p50/p99 s",
    "web RSS MiB",
    "worker RSS MiB",
    "pending batches",
    "runs behind",
)


def row(number: int, minute: Minute) -> tuple[str, ...]:
    failures = ", ".join(f"{name}: {count}" for name, count in sorted(minute.failures.items())) or "0"
    latency = "/".join(f"{percentile(minute.latencies, q) * 1000:.0f}" for q in (0.5, 0.99))
    latency = latency if minute.latencies else "-"
    lag = "/".join(f"{percentile(minute.lags, q):.1f}" for q in (0.5, 0.99)) if minute.lags else "-"
    return (
        str(number + 1),
        str(minute.posts),
        str(minute.spans),
        failures,
        latency,
        lag,
        f"{minute.web_mib:.0f}" if minute.web_mib else "-",
        f"{minute.worker_mib:.0f}" if minute.worker_mib else "-",
        str(minute.pending_batches),
        str(minute.runs_behind),
    )


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(cells[column]) for cells in [header, *rows]) for column in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), line(tuple("-" * width for width in widths)), *map(line, rows)])


# --- Main ----------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    agents = build_agents(args)
    with throwaway_ctxview(
        "postgres",
        args.workers,
        pg_admin_url=args.pg_admin_url,
        redis_url=args.redis_url,
        web_workers=args.web_workers,
    ) as instance:
        soak = Soak(args, instance.traces_url, instance.key)
        interval = args.clients * args.agents_per_post / args.rate
        print(
            f"soak: {args.minutes:g} min at {args.rate:g} spans/s from {args.clients} clients "
            f"(a POST of {args.agents_per_post} calls every {interval:.2f} s each), "
            f"{args.workers} workers, {instance.base_url}",
            flush=True,
        )
        clients = [
            threading.Thread(
                target=soak.client,
                args=(agents[n * args.agents_per_client : (n + 1) * args.agents_per_client], interval),
                daemon=True,
            )
            for n in range(args.clients)
        ]
        observer = threading.Thread(target=soak.observe, args=(instance,), daemon=True)
        sampler = threading.Thread(target=soak.sample_memory, args=(instance,), daemon=True)
        for thread in [*clients, observer, sampler]:
            thread.start()
        deadline = soak.started + args.minutes * 60
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
        soak.stop.set()
        for thread in clients:
            thread.join()
        load_seconds = time.monotonic() - soak.started
        sampler.join()
        minutes_run = math.ceil(args.minutes)  # posts start before the deadline; the last may be partial
        if not soak.minutes[minutes_run - 1].web_mib:  # the load ended as the minute did
            soak.record_minute(instance, minutes_run - 1)
        # The catch-up after the load: how long until every acknowledged call is analysed.
        observer.join(timeout=args.drain_timeout)
        drained_after = time.monotonic() - soak.started - load_seconds
        drained = not observer.is_alive()
        if drained:  # the state once everything is in
            soak.record_minute(instance, minutes_run)
        progress = instance.progress()
        duplicated = instance.execute(
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM ingest_span "
            "GROUP BY project_id, trace_id, span_id HAVING count(*) > 1) AS twice"
        )[0][0]

    rows = [row(number, soak.minutes[number]) for number in range(minutes_run)]
    if drained:
        rows.append(("drained", *row(minutes_run, soak.minutes[minutes_run])[1:]))
    print(format_table(HEADER, rows))
    all_latencies = [value for minute in soak.minutes.values() for value in minute.latencies]
    all_lags = [value for minute in soak.minutes.values() for value in minute.lags]
    print(
        f"\n{soak.acked_spans} spans acknowledged in {load_seconds:.0f} s "
        f"({soak.acked_spans / load_seconds:.1f}/s); stored {progress.spans}, duplicated {duplicated}, "
        f"calls {progress.calls}, runs {progress.runs} ({progress.runs_behind} behind), "
        f"batches pending {progress.pending_batches}, failed {progress.failed_batches}"
    )
    p50, p99 = (percentile(all_latencies, q) * 1000 for q in (0.5, 0.99))
    lag50, lag99 = (percentile(all_lags, q) for q in (0.5, 0.99))
    worst = max(all_lags, default=float("nan"))
    print(
        f"POST p50/p99 {p50:.0f}/{p99:.0f} ms; worker lag p50/p99/max {lag50:.1f}/{lag99:.1f}/{worst:.1f} s"
    )
    steady = [
        soak.minutes[n] for n in sorted(soak.minutes) if 1 <= n < minutes_run and soak.minutes[n].web_mib
    ]
    if len(steady) >= 2:
        for name in ("web_mib", "worker_mib"):
            first, last = getattr(steady[0], name), getattr(steady[-1], name)
            label = name.split("_")[0]
            print(f"{label} RSS from minute 2 to minute {minutes_run}: {first:.0f} -> {last:.0f} MiB")
    if not drained:
        print(f"NOT DRAINED: calls still not analysed {args.drain_timeout:.0f} s after the load")
        return 1
    print(f"drained {drained_after:.1f} s after the load ended")
    lost = soak.acked_spans - progress.spans
    if lost or duplicated or progress.failed_batches:
        print(f"FAILED: {lost} acknowledged spans missing, {duplicated} duplicated")
        return 1
    return 0


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--minutes", type=float, default=10, help="how long to load (default 10)")
    parser.add_argument("--rate", type=float, default=20, help="spans (model calls) per second, all clients")
    parser.add_argument("--clients", type=int, default=4, help="posting threads (default 4)")
    parser.add_argument("--agents-per-client", type=int, default=10, help="conversations per client")
    parser.add_argument("--agents-per-post", type=int, default=5, help="calls (of different agents) per POST")
    parser.add_argument("--window", type=int, default=16, help="messages of history each call resends")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between progress samples")
    parser.add_argument("--drain-timeout", type=float, default=600, help="seconds to wait after the load")
    parser.add_argument("--pg-admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11", help="flushed at start and end")
    args = parser.parse_args()
    if not 0 < args.rate <= 2000 or not 1 <= args.clients <= 64 or args.minutes <= 0:
        parser.error("keep it bounded: 0 < --rate <= 2000, 1 <= --clients <= 64, --minutes > 0")
    args.agents_per_post = min(args.agents_per_post, args.agents_per_client)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the children
    try:
        sys.exit(run(args))
    except KeyboardInterrupt:
        sys.exit("interrupted; everything started was stopped")


if __name__ == "__main__":
    main()
