"""Ingest benchmark: POST pre-encoded OTLP/protobuf batches of ~4 KB LLM spans and print figures.

    .venv/bin/python bench/load.py                      # embedded, then postgres + 1 worker (make bench)
    .venv/bin/python bench/load.py --mode postgres --workers 2 --spans 40960
    .venv/bin/python bench/load.py --endpoint http://127.0.0.1:6006/v1/traces   # any OTLP/HTTP server

For ctxview modes the script starts a throwaway instance (temp data dir or database, gunicorn,
Celery workers) and stops it at the end. For --endpoint it measures acceptance only.
"""

import argparse
import contextlib
import gzip
import json
import os
import queue
import random
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis
import requests
from celery import Celery
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ROOT = Path(__file__).resolve().parent.parent
BATCH_SIZE = 512
SPANS_PER_TRACE = 50
MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-5"), ("gcp.gemini", "gemini-2.5-pro")]

# --- Payload -------------------------------------------------------------------------------------


def make_vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    # Random pseudo-words: text that gzip shrinks about as much as real prose, not 100x.
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [26 - i for i in range(26)]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(size)]


def text(rng: random.Random, vocabulary: list[str], chars: int) -> str:
    return " ".join(rng.choices(vocabulary, k=max(1, chars // 6)))


def attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def build_batches(total_spans: int, seed: int = 1) -> list[bytes]:
    """Serialized ExportTraceServiceRequests of BATCH_SIZE chat spans, SPANS_PER_TRACE per trace."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    run = os.urandom(8)  # a fresh id prefix per run: re-runs against one server never collide
    now = time.time_ns()
    batches, request, system_prompt, provider, model = [], None, "", "", ""
    for index in range(total_spans):
        trace, position = divmod(index, SPANS_PER_TRACE)
        if index % BATCH_SIZE == 0:
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(
                [attribute("service.name", "bench-agent"), attribute("telemetry.sdk.language", "python")]
            )
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name, scope_spans.scope.version = "bench.genai", "1.0"
            batches.append(request)
        if position == 0 or index % BATCH_SIZE == 0:
            # One conversation per trace: same system prompt and model for all its spans.
            trace_rng = random.Random(f"{seed}-{trace}")
            system_prompt = text(trace_rng, vocabulary, 500)
            provider, model = trace_rng.choice(MODELS)
        messages = [
            {"role": "system", "parts": [{"type": "text", "content": system_prompt}]},
            {"role": "user", "parts": [{"type": "text", "content": text(rng, vocabulary, 1000)}]},
            {"role": "assistant", "parts": [{"type": "text", "content": text(rng, vocabulary, 700)}]},
            {"role": "user", "parts": [{"type": "text", "content": text(rng, vocabulary, 700)}]},
        ]
        span: Span = scope_spans.spans.add()
        span.trace_id = run + struct.pack(">Q", trace + 1)
        span.span_id = struct.pack(">Q", index + 1)
        if position:
            span.parent_span_id = struct.pack(">Q", trace * SPANS_PER_TRACE + 1)
        span.name, span.kind = f"chat {model}", Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano = now + index * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + rng.randint(200, 9000) * 1_000_000
        span.attributes.extend(
            [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.provider.name", provider),
                attribute("gen_ai.request.model", model),
                attribute("gen_ai.response.model", model),
                attribute("gen_ai.conversation.id", f"conv-{run.hex()}-{trace}"),
                attribute("gen_ai.usage.input_tokens", rng.randint(500, 20000)),
                attribute("gen_ai.usage.output_tokens", rng.randint(20, 2000)),
                attribute("gen_ai.usage.cache_read.input_tokens", rng.randint(0, 15000)),
                attribute("gen_ai.input.messages", json.dumps(messages)),
            ]
        )
    return [request.SerializeToString() for request in batches]


# --- Posting -------------------------------------------------------------------------------------


@dataclass
class PostResult:
    seconds: float = 0.0
    accepted_spans: int = 0
    retries: int = 0
    latencies: list[float] = field(default_factory=list)
    failures: Counter = field(default_factory=Counter)  # status (or exception name) -> count


def post_all(
    url: str, key: str | None, bodies: list[bytes], spans: list[int], clients: int, use_gzip: bool
) -> PostResult:
    """POST every body once from ``clients`` threads, each with its own keep-alive session."""
    headers = {"Content-Type": "application/x-protobuf"}
    if use_gzip:
        headers["Content-Encoding"] = "gzip"
    if key:
        headers["Authorization"] = f"Bearer {key}"
    work: queue.Queue = queue.Queue()
    for item in zip(bodies, spans, strict=True):
        work.put(item)
    result, lock = PostResult(), threading.Lock()

    def client() -> None:
        session = requests.Session()
        while True:
            try:
                body, count = work.get_nowait()
            except queue.Empty:
                return
            for _attempt in range(30):
                started = time.perf_counter()
                try:
                    response = session.post(url, data=body, headers=headers, timeout=120)
                    outcome, retry_after = response.status_code, response.headers.get("Retry-After")
                except requests.RequestException as exc:
                    outcome, retry_after = type(exc).__name__, None
                with lock:
                    result.latencies.append(time.perf_counter() - started)
                    if outcome == 200:
                        result.accepted_spans += count
                    else:
                        result.failures[outcome] += 1
                if outcome == 503 and retry_after:  # what OTLP exporters do: wait, then send again
                    with lock:
                        result.retries += 1
                    time.sleep(min(float(retry_after), 30))
                    continue
                break

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - started
    return result


def wait_until_stored(count_spans: Callable[[], int], expected: int, timeout: float) -> tuple[bool, int]:
    """Poll the span table until it holds ``expected`` rows; (reached, last count)."""
    deadline = time.monotonic() + timeout
    while True:
        stored = count_spans()
        if stored >= expected or time.monotonic() > deadline:
            return stored >= expected, stored
        time.sleep(0.1)


# --- A throwaway ctxview -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def child_process(args: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen]:
    """A child in its own process group (Ctrl-C reaches us only), stopped with its children at exit."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


def manage(env: dict[str, str], *args: str) -> str:
    command = [sys.executable, "manage.py", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    name = f"ctxview_bench_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def throwaway_ctxview(args: argparse.Namespace, mode: str) -> Iterator[tuple[str, str, Callable[[], int]]]:
    """Start ctxview in ``mode``; yield (traces URL, ingest key, a function counting stored spans)."""
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"ctxview-bench-{mode}-")))
        # No backpressure: measure how fast ctxview goes, not when it starts refusing.
        env = {
            **os.environ,
            "CTXVIEW_DATA_DIR": str(folder / "data"),
            "CTXVIEW_INGEST_MAX_PENDING_BATCHES": "0",
        }
        for name in ("DATABASE_URL", "CELERY_BROKER_URL"):  # embedded unless we say otherwise
            env.pop(name, None)
        if mode == "postgres":
            env["DATABASE_URL"] = stack.enter_context(postgres_database(args.pg_admin_url))
            env["CELERY_BROKER_URL"] = args.redis_url
            redis.Redis.from_url(args.redis_url).flushdb()  # no tasks left over from an earlier run
            stack.callback(lambda: redis.Redis.from_url(args.redis_url).flushdb())
        manage(env, "migrate", "--noinput")
        key = manage(env, "createproject", "bench").strip().splitlines()[-1]

        if mode == "postgres":
            nodes = [f"bench{i}-{os.getpid()}@localhost" for i in range(args.workers)]
            for node in nodes:
                worker = "-m celery -A ctxview worker --pool=prefork --concurrency=1 --loglevel=WARNING"
                worker += f" --without-gossip --without-mingle -n {node}"
                log = folder / f"{node.split('@')[0]}.log"
                stack.enter_context(child_process([sys.executable, *worker.split()], env, log))
            # Wait until every worker answers, so worker start-up is not part of the timings.
            control = Celery(broker=args.redis_url).control
            wait_for(lambda: len(control.ping(destination=nodes, timeout=0.5)) == len(nodes), "workers")

        port = free_port()
        web = f"-m gunicorn ctxview.wsgi:application -b 127.0.0.1:{port} --workers 2 --threads 4".split()
        gunicorn = stack.enter_context(child_process([sys.executable, *web], env, folder / "web.log"))
        url = f"http://127.0.0.1:{port}/v1/traces"

        def web_answers() -> bool:
            if gunicorn.poll() is not None:
                raise RuntimeError("gunicorn exited:\n" + (folder / "web.log").read_text()[-3000:])
            with contextlib.suppress(requests.RequestException):  # not listening yet, or still loading
                return requests.get(url, timeout=5).status_code == 405
            return False

        wait_for(web_answers, "gunicorn")

        if mode == "postgres":
            connection = stack.enter_context(psycopg.connect(env["DATABASE_URL"], autocommit=True))
        else:
            database = folder / "data" / "ctxview.sqlite3"
            connection = stack.enter_context(contextlib.closing(sqlite3.connect(database)))
        yield url, key, lambda: connection.execute("SELECT count(*) FROM ingest_span").fetchone()[0]


# --- Report --------------------------------------------------------------------------------------

COLUMNS = (
    f"{'mode':<22} {'spans':>7} {'batches':>7} {'wire B/span':>11} {'accepted/s':>10} {'p50 ms':>7} "
    f"{'p99 ms':>7} {'stored after s':>14} {'e2e spans/s':>11} {'non-200':>7} {'retries':>7}"
)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def table_row(
    label: str, bodies: list[bytes], spans: int, posted: PostResult, stored_after: float | None
) -> str:
    stored = f"{stored_after:.2f}" if stored_after else "-"
    e2e = f"{spans / stored_after:.0f}" if stored_after else "-"
    p50, p99 = (percentile(posted.latencies, fraction) * 1000 for fraction in (0.5, 0.99))
    return (
        f"{label:<22} {spans:>7} {len(bodies):>7} {sum(map(len, bodies)) / spans:>11.0f} "
        f"{posted.accepted_spans / posted.seconds:>10.0f} {p50:>7.1f} {p99:>7.1f} {stored:>14} {e2e:>11} "
        f"{sum(posted.failures.values()):>7} {posted.retries:>7}"
    )


def run_one(args: argparse.Namespace, mode: str, bodies: list[bytes], spans: list[int]) -> str:
    total = sum(spans)
    if mode == "external":
        posted = post_all(args.endpoint, args.key, bodies, spans, args.clients, not args.no_gzip)
        stored_after = None
    else:
        with throwaway_ctxview(args, mode) as (url, key, count_spans):
            started = time.perf_counter()
            posted = post_all(url, key, bodies, spans, args.clients, not args.no_gzip)
            reached, stored = wait_until_stored(count_spans, posted.accepted_spans, args.store_timeout)
            stored_after = time.perf_counter() - started if reached else None
            if not reached:
                print(
                    f"  {mode}: {stored} of {posted.accepted_spans} spans stored after {args.store_timeout}s"
                )
        if mode == "postgres":
            mode = f"postgres ({args.workers} worker{'s' if args.workers > 1 else ''})"
    if posted.failures:
        print(f"  {mode}: non-200 answers: {dict(posted.failures)}")
    return table_row(mode, bodies, total, posted, stored_after)


def parse_args() -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--mode", choices=["embedded", "postgres", "all"], default="all")
    parser.add_argument("--spans", type=int, default=40 * BATCH_SIZE, help="total spans (default 20480)")
    parser.add_argument("--clients", type=int, default=4, help="posting threads")
    parser.add_argument("--workers", type=int, default=1, help="Celery worker processes (postgres mode)")
    parser.add_argument("--endpoint", help="OTLP/HTTP traces URL of another server: measure acceptance only")
    parser.add_argument("--key", help="Bearer key for --endpoint")
    parser.add_argument("--no-gzip", action="store_true", help="send uncompressed protobuf")
    parser.add_argument("--store-timeout", type=float, default=600, help="seconds to wait for storage")
    parser.add_argument("--pg-admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the children
    started = time.perf_counter()
    raw = build_batches(args.spans)
    bodies = [gzip.compress(body, 6) if not args.no_gzip else body for body in raw]
    spans = [min(BATCH_SIZE, args.spans - i * BATCH_SIZE) for i in range(len(raw))]
    raw_size, sent_size = (sum(map(len, batches)) / args.spans for batches in (raw, bodies))
    took = time.perf_counter() - started
    print(f"built {len(raw)} batches in {took:.1f}s: {raw_size:.0f} B/span protobuf, {sent_size:.0f} sent")
    modes = ["external"] if args.endpoint else ["embedded", "postgres"] if args.mode == "all" else [args.mode]
    try:
        rows = [run_one(args, mode, bodies, spans) for mode in modes]
    except KeyboardInterrupt:
        sys.exit("interrupted; everything started was stopped")
    print(COLUMNS)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
