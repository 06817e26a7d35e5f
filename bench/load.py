"""Load benchmark: POST pre-encoded OTLP/protobuf batches of ~4 KB LLM spans and time what follows.

    .venv/bin/python bench/load.py                      # embedded, then postgres + 1 worker
    .venv/bin/python bench/load.py --mode postgres --workers 2 --spans 20000
    .venv/bin/python bench/load.py --mode postgres --protocol both   # OTLP/HTTP, then OTLP/gRPC
    .venv/bin/python bench/load.py --endpoint http://127.0.0.1:6006/v1/traces   # any OTLP/HTTP server

For ctxview modes the script starts a throwaway instance (temp data dir or database, gunicorn,
Celery workers), times until every span is stored, every call normalised (numbered in its run) and
every run analysed, and stops it at the end. For --endpoint it measures acceptance only.
bench/suite.py runs this and the other benchmarks and prints one table.
"""

import argparse
import gzip
import os
import queue
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import requests
from payloads import BATCH_SIZE, build_batches, build_conversations, conversation_spans, span_counts
from servers import (
    POSTGRES_SHARED,
    SERVER_GROUPS,
    Ctxview,
    Group,
    MemorySampler,
    Peaks,
    Phoenix,
    throwaway_ctxview,
)

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
                if outcome in (429, 503):  # what OTLP exporters do: wait, then send again
                    with lock:
                        result.retries += 1
                    time.sleep(min(float(retry_after or 1), 30))
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


def post_all_grpc(
    target: str, key: str | None, bodies: list[bytes], spans: list[int], clients: int, use_gzip: bool
) -> PostResult:
    """Send every (uncompressed) body once as a TraceService/Export call from ``clients`` threads, each
    with its own channel; gRPC compresses it when ``use_gzip``. UNAVAILABLE is retried after the
    RetryInfo delay, as the OTLP/gRPC exporters do."""
    import grpc
    from google.rpc import error_details_pb2

    method = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
    metadata = (("authorization", f"Bearer {key}"),) if key else ()
    compression = grpc.Compression.Gzip if use_gzip else grpc.Compression.NoCompression
    work: queue.Queue = queue.Queue()
    for item in zip(bodies, spans, strict=True):
        work.put(item)
    result, lock = PostResult(), threading.Lock()

    def client() -> None:
        # Bytes in, bytes out: the bodies are already encoded, as for the HTTP load.
        with grpc.insecure_channel(target, options=[("grpc.max_send_message_length", -1)]) as channel:
            export = channel.unary_unary(method)
            while True:
                try:
                    body, count = work.get_nowait()
                except queue.Empty:
                    return
                for _attempt in range(30):
                    started = time.perf_counter()
                    delay = None
                    try:
                        export(body, metadata=metadata, timeout=120, compression=compression)
                        outcome = "OK"
                    except grpc.RpcError as error:
                        outcome = error.code().name
                        trailer = dict(error.trailing_metadata() or ()).get("google.rpc.retryinfo-bin")
                        if error.code() == grpc.StatusCode.UNAVAILABLE:
                            retry = error_details_pb2.RetryInfo.FromString(trailer) if trailer else None
                            delay = retry.retry_delay.seconds if retry else 1
                    with lock:
                        result.latencies.append(time.perf_counter() - started)
                        if outcome == "OK":
                            result.accepted_spans += count
                        else:
                            result.failures[outcome] += 1
                    if delay is not None:
                        with lock:
                            result.retries += 1
                        time.sleep(min(delay, 30))
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


# --- One load, timed -----------------------------------------------------------------------------


@dataclass
class LoadResult:
    label: str
    spans: int
    batches: int
    wire_bytes: int
    posted: PostResult
    stored_s: float | None = None  # every accepted span stored (queryable)
    normalised_s: float | None = None  # every call stored and numbered in its run
    analysed_s: float | None = None  # every run's analysed_seq == call_count
    memory: dict[str, Peaks] = field(default_factory=dict)
    load_before: float = 0.0
    load_after: float = 0.0
    load_peak: float = 0.0  # the highest 1-minute load average seen while polling
    notes: list[str] = field(default_factory=list)
    pss_kib: int = 0  # peak PSS of the server's processes together (the receiver taking the load, workers)
    protocol: str = "http"  # the receiver that took the load: "http" (gunicorn) or "grpc"
    workers: int = 0  # Celery worker processes (0: tasks in the web process, or not ctxview)
    # Samples of the server's database sessions while the load drains: (waiting on a lock, active).
    sessions: list[tuple[int, int]] = field(default_factory=list)
    machine_busy: float | None = None  # the share of all cores busy (anything) from first POST to done
    # While the load drains (from the last POST answered until done): seconds, the server's CPU seconds
    # (web, workers, PostgreSQL backends) and the share of all cores busy with anything.
    drain_s: float | None = None
    drain_cpu_s: float | None = None
    drain_machine_busy: float | None = None
    drain_client_cpu_s: float | None = None  # this process's CPU meanwhile (its poller and sampler)
    # PostgreSQL: how much the instance's database grew over the load (pg_database_size: tables, indexes,
    # TOAST, dead rows not yet vacuumed), and the WAL the whole server wrote meanwhile (every database's).
    db_bytes: int | None = None
    wal_bytes: int | None = None

    @property
    def done_s(self) -> float | None:
        """Seconds until the end-to-end goal: analysed for ctxview, stored (queryable) for the rest."""
        return self.analysed_s if self.analysed_s is not None else self.stored_s


def timed_load(
    label: str,
    url: str,
    key: str | None,
    bodies: list[bytes],
    spans: list[int],
    milestones: Callable[[int], dict[str, bool]] | None,
    clients: int,
    use_gzip: bool,
    timeout: float,
    memory_groups: dict[str, Group] | None = None,
    poll_interval: float = 0.2,
    protocol: str = "http",
    sessions: Callable[[], tuple[int, int]] | None = None,
) -> LoadResult:
    """Post the load and time, from the first POST, when each of ``milestones(expected)`` first holds.

    ``protocol`` "grpc": ``url`` is the host:port of an OTLP/gRPC receiver and the bodies are uncompressed.

    ``milestones`` reads the server's progress and compares it with ``expected``: every span sent until
    posting ends, then the spans accepted.
    """
    result = LoadResult(label, sum(spans), len(bodies), sum(map(len, bodies)), PostResult())
    result.protocol = protocol
    result.load_before = os.getloadavg()[0]
    reached: dict[str, float] = {}
    expected = [sum(spans)]
    failed: Counter = Counter()
    posting_done = threading.Event()
    stop = threading.Event()
    started = time.perf_counter()

    def poll() -> None:
        while not stop.is_set():
            now = time.perf_counter() - started
            result.load_peak = max(result.load_peak, os.getloadavg()[0])
            try:
                state = milestones(expected[0]) if milestones else {}
            except Exception as exc:  # the server is busy or restarting; try again
                failed[f"{type(exc).__name__}: {exc}"[:200]] += 1
                state = {}
            for name, done in state.items():
                if done and name not in reached:
                    reached[name] = now
            if sessions is not None and not all(state.values() or [False]):
                try:
                    result.sessions.append(sessions())
                except Exception as exc:  # as for the milestones: try again at the next poll
                    failed[f"{type(exc).__name__}: {exc}"[:200]] += 1
            if posting_done.is_set() and (not state or all(state.values())):
                return
            if now > timeout:
                result.notes.append(f"gave up after {timeout:.0f} s: {state}")
                return
            stop.wait(poll_interval)

    cores_before = core_times()
    # Peak PSS of the receiver taking the load and the workers (gunicorn idles through a gRPC load).
    pss_groups = ("grpc" if protocol == "grpc" else "web", "worker")
    with MemorySampler(memory_groups or {}, pss_groups=pss_groups) as sampler:
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        post = post_all_grpc if protocol == "grpc" else post_all
        result.posted = post(url, key, bodies, spans, clients, use_gzip)
        posted_at = time.perf_counter() - started
        cores_posted = core_times()
        cpu_posted = sampler.server_cpu_seconds()
        client_posted = time.process_time()
        expected[0] = result.posted.accepted_spans
        posting_done.set()
        poller.join()
        stop.set()
        result.drain_client_cpu_s = time.process_time() - client_posted
        busy, idle = (after - before for after, before in zip(core_times(), cores_before, strict=True))
        result.machine_busy = busy / (busy + idle) if busy + idle else None
        busy, idle = (after - before for after, before in zip(core_times(), cores_posted, strict=True))
        result.drain_machine_busy = busy / (busy + idle) if busy + idle else None
    result.drain_cpu_s = sampler.server_cpu_seconds() - cpu_posted
    result.memory = sampler.peaks
    result.pss_kib = sampler.pss_peak_kib
    result.stored_s = reached.get("stored")
    result.normalised_s = reached.get("normalised")
    result.analysed_s = reached.get("analysed")
    if result.done_s is not None:
        result.drain_s = result.done_s - posted_at
    result.load_after = os.getloadavg()[0]
    result.notes += [f"progress query failed {count}x: {error}" for error, count in failed.items()]
    for name, peaks in result.memory.items():
        if peaks.exited:  # e.g. a backend closed after CONN_MAX_AGE, a parallel worker
            result.notes.append(
                f"{len(peaks.exited)} {name} processes ended during the load: their CPU after their last "
                f"sample (at most {sampler.interval} s before) is not counted"
            )
    if result.posted.failures:
        result.notes.append(f"non-200 answers: {dict(result.posted.failures)}")
    return result


def core_times() -> tuple[int, int]:
    """All cores' (busy, idle) time so far, in clock ticks (/proc/stat; idle includes waiting on I/O)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]
    return sum(ticks[:8]) - idle, idle


def ctxview_milestones(instance: Ctxview, calls_per_span: float = 1.0) -> Callable[[int], dict[str, bool]]:
    """Stored: every span; normalised: every call stored and numbered; analysed: every run analysed.

    ``calls_per_span``: the share of the load's spans that are model calls (the others are agent spans)."""

    def milestones(expected: int) -> dict[str, bool]:
        progress = instance.progress()
        calls = round(expected * calls_per_span)
        stored = progress.spans >= expected
        normalised = (
            stored
            and progress.pending_batches == 0
            and progress.calls >= calls
            and progress.numbered_calls >= calls
        )
        analysed = normalised and not progress.runs_behind
        return {"stored": stored, "normalised": normalised, "analysed": analysed}

    return milestones


def phoenix_milestones(phoenix: Phoenix) -> Callable[[int], dict[str, bool]]:
    """Stored: Phoenix's API counts every span accepted."""
    return lambda expected: {"stored": phoenix.span_count() >= expected}


def load_ctxview(
    mode: str,
    workers: int,
    bodies: list[bytes],
    spans: list[int],
    args: argparse.Namespace,
    after=None,
    protocol: str = "http",
    calls_per_span: float = 1.0,
    shape: str = "",
) -> LoadResult:
    """The load against a throwaway ctxview; ``after(instance, result)`` runs before it is stopped.

    ``protocol`` "grpc": the same bodies to its OTLP/gRPC receiver, which gRPC compresses when gzip is on
    (the HTTP load sends them gzipped ahead of time)."""
    if protocol == "grpc" and not args.no_gzip:
        bodies = [gzip.decompress(body) for body in bodies]
    with throwaway_ctxview(
        mode,
        workers,
        pg_admin_url=args.pg_admin_url,
        redis_url=args.redis_url,
        profile_dir=args.profile_dir,
        py_spy=args.py_spy,
        pool=args.pool,
        grpc=protocol == "grpc",
    ) as instance:
        grpc = protocol == "grpc"
        label = f"{instance.label}, OTLP/gRPC" if grpc else instance.label
        if mode == "postgres":
            size, lsn = instance.execute(SIZE_SQL)[0]
            tables = dict(instance.execute(TABLES_SQL))
        result = timed_load(
            f"{shape}: {label}" if shape else label,
            instance.grpc_target if grpc else instance.traces_url,
            instance.key,
            bodies,
            spans,
            ctxview_milestones(instance, calls_per_span),
            args.clients,
            not args.no_gzip,
            args.timeout,
            instance.memory_groups(),
            protocol=protocol,
            sessions=instance.sessions if mode == "postgres" else None,
        )
        result.workers = workers if mode == "postgres" else 0
        if mode == "postgres":
            grown, wal = instance.execute(GROWTH_SQL.format(lsn=lsn))[0]
            result.db_bytes, result.wal_bytes = int(grown) - int(size), int(wal)
            result.notes.append(table_growth(tables, dict(instance.execute(TABLES_SQL)), result))
        progress = instance.progress()
        if progress.failed_batches:
            result.notes.append(f"{progress.failed_batches} batches failed")
        if progress.calls != round(result.posted.accepted_spans * calls_per_span):
            result.notes.append(f"{progress.calls} calls for {result.posted.accepted_spans} spans")
        if after is not None:
            after(instance, result)
        return result


SIZE_SQL = "SELECT pg_database_size(current_database()), pg_current_wal_lsn()::text"
GROWTH_SQL = "SELECT pg_database_size(current_database()), pg_wal_lsn_diff(pg_current_wal_lsn(), '{lsn}')"


# Each table's size with its indexes and TOAST.
TABLES_SQL = """
SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
"""


def table_growth(before: dict[str, int], after: dict[str, int], result: LoadResult, shown: int = 8) -> str:
    """How much each table grew over the load, per accepted span: the largest, then the rest together."""
    spans = result.posted.accepted_spans or 1
    grown = sorted(((after[name] - before.get(name, 0), name) for name in after), reverse=True)
    parts = [f"{name.removeprefix('ingest_')} {size / spans:,.0f}" for size, name in grown[:shown]]
    parts.append(f"other tables {sum(size for size, _ in grown[shown:]) / spans:,.0f}")
    return "tables grew per span (bytes, indexes and TOAST included): " + ", ".join(parts)


def load_endpoint(url: str, key: str | None, bodies: list[bytes], spans: list[int], args) -> LoadResult:
    return timed_load(url, url, key, bodies, spans, None, args.clients, not args.no_gzip, args.timeout)


# --- Report --------------------------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def seconds(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


LOAD_HEADER = (
    "target",
    "spans",
    "accepted spans/s",
    "POST p50/p99 ms",
    "stored s",
    "normalised s",
    "analysed s",
    "end-to-end spans/s",
    "web RSS MiB",
    "worker RSS MiB",
    "PSS MiB web+worker",
    "CPU ms/span web+worker+pg",
    "CPU ms/span web",
    "CPU ms/span gRPC",
    "CPU ms/span workers",
    "CPU ms/span PostgreSQL",
    "CPU ms/span total",
    "CPU ms/span PostgreSQL shared (all DBs, not in total)",
    "CPU busy web+worker+pg (machine)",
    "CPU busy while draining web+worker+pg (machine; bench)",
    "DB sessions per worker: lock-wait/active",
    "load avg",
)


def cpu_ms(result: LoadResult, *names: str) -> float | None:
    """CPU milliseconds per accepted span of the named process groups together, from the first POST
    until the load was done (None: no span accepted, or none of the groups sampled)."""
    spans = result.posted.accepted_spans
    found = [result.memory[name].cpu_seconds for name in names if name in result.memory]
    return sum(found) * 1000 / spans if spans and found else None


def milliseconds(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "-"


def cpu_per_span(result: LoadResult) -> str:
    """CPU time the server's processes used per accepted span: the receivers (gunicorn and the gRPC
    receiver), the workers and the PostgreSQL backends of the instance's database."""
    parts = [cpu_ms(result, *names) for names in (("web", "grpc"), ("worker",), ("postgres",))]
    if cpu_ms(result, *SERVER_GROUPS) is None:
        return "-"
    shown = "+".join(f"{part:.2f}" if part is not None else "-" for part in parts)
    return f"{sum(part or 0 for part in parts):.2f} ({shown})"


# Each server process group's CPU per span on its own: its column in the load table, then the total.
CPU_COLUMNS = (("web",), ("grpc",), ("worker",), ("postgres",), SERVER_GROUPS, (POSTGRES_SHARED,))


def cpu_columns(result: LoadResult) -> tuple[str, ...]:
    return tuple(milliseconds(cpu_ms(result, *names)) for names in CPU_COLUMNS)


def cpu_busy(result: LoadResult) -> str:
    """The share of the machine's cores that the server's processes (web, workers, PostgreSQL backends)
    kept busy until the load was done; in brackets, the share busy with anything (the load's client too)."""
    done = result.done_s
    names = SERVER_GROUPS
    parts = [result.memory[name].cpu_seconds for name in names if name in result.memory]
    if not done or not parts:
        return "-"
    machine = f" ({100 * result.machine_busy:.0f}%)" if result.machine_busy is not None else ""
    return f"{100 * sum(parts) / (done * (os.cpu_count() or 1)):.0f}%{machine} of {os.cpu_count()} cores"


MIN_DRAIN_S = 1.0  # shorter, the share is that of a sampling interval or two


def drain_busy(result: LoadResult) -> str:
    """As ``cpu_busy``, from the last POST answered until the load was done: the load's client is idle
    then, and what keeps the cores from being busy is the server alone. None when there was no such
    time (the embedded mode answers a POST once its batch is processed)."""
    if result.drain_s is None or result.drain_s < MIN_DRAIN_S or result.drain_cpu_s is None:
        return "-"
    cores = os.cpu_count() or 1
    share = [f"{100 * result.drain_machine_busy:.0f}%"] if result.drain_machine_busy is not None else []
    if result.drain_client_cpu_s is not None:  # the bench's poller and sampler, on the same cores
        share.append(f"bench {100 * result.drain_client_cpu_s / (result.drain_s * cores):.0f}%")
    machine = f" ({'; '.join(share)})" if share else ""
    return f"{100 * result.drain_cpu_s / (result.drain_s * cores):.0f}%{machine} over {result.drain_s:.1f} s"


def session_waits(result: LoadResult) -> str:
    """How the workers' database sessions spent the load, as a share of the workers: waiting on a lock
    (a run's row, a trace's advisory lock) and running a statement at all."""
    if not result.sessions or not result.workers:
        return "-"
    samples = len(result.sessions)
    waiting = sum(waits for waits, _ in result.sessions) / samples / result.workers
    active = sum(active for _, active in result.sessions) / samples / result.workers
    return f"{100 * waiting:.0f}%/{100 * active:.0f}%"


def load_row(result: LoadResult) -> tuple[str, ...]:
    posted = result.posted
    p50, p99 = (percentile(posted.latencies, fraction) * 1000 for fraction in (0.5, 0.99))
    done = result.done_s
    end_to_end = f"{posted.accepted_spans / done:.0f}" if done else "-"
    memory = result.memory
    receiver = memory.get("grpc" if result.protocol == "grpc" else "web")
    return (
        result.label,
        f"{result.spans}",
        f"{posted.accepted_spans / posted.seconds:.0f}" if posted.seconds else "-",
        f"{p50:.0f}/{p99:.0f}",
        seconds(result.stored_s),
        seconds(result.normalised_s),
        seconds(result.analysed_s),
        end_to_end,
        receiver.mib() if receiver else "-",
        memory["worker"].mib() if "worker" in memory else "-",
        f"{result.pss_kib / 1024:.0f}" if result.pss_kib else "-",
        cpu_per_span(result),
        *cpu_columns(result),
        cpu_busy(result),
        drain_busy(result),
        session_waits(result),
        f"{result.load_before:.1f}->{result.load_after:.1f}",
    )


CPU_HEADER = (
    "target",
    "spans",
    "end-to-end spans/s",
    "CPU ms/span: web",
    "gRPC receiver",
    "workers",
    "PostgreSQL",
    "total",
    "PostgreSQL shared (all DBs)",
    "DB bytes/span",
    "WAL bytes/span (whole server)",
    "load avg before->after (max)",
)


def cpu_row(result: LoadResult) -> tuple[str, ...]:
    """Where the server's CPU went, per span, over the whole load (first POST until all analysed)."""
    done = result.done_s
    end_to_end = f"{result.posted.accepted_spans / done:.0f}" if done else "-"
    load = f"{result.load_before:.1f}->{result.load_after:.1f} ({result.load_peak:.1f})"
    spans = result.posted.accepted_spans
    grown = [
        f"{size / spans:,.0f}" if size is not None and spans else "-"
        for size in (result.db_bytes, result.wal_bytes)
    ]
    return (result.label, f"{result.spans}", end_to_end, *cpu_columns(result), *grown, load)


CPU_NOTE = (
    "CPU ms per accepted span from the first POST until every run was analysed (/proc utime + stime, sampled"
    " every 0.25 s): web = gunicorn (master and workers), gRPC receiver = manage.py serve_otlp_grpc,"
    " workers = the Celery node and its pool, PostgreSQL = the backends of the instance's database and"
    " their parallel workers (the benchmark's own polling session aside); total = those four."
    " PostgreSQL shared = the postmaster, checkpointer, WAL and background writers: they serve every"
    " database on the server, so the machine's other users are in it, and it is not in the total."
    " DB bytes/span: growth of the instance's database over the load (pg_database_size) per span; WAL"
    " bytes/span: WAL the whole server wrote meanwhile (other databases' too) per span."
)


def format_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """A Markdown table, columns padded to their widest cell."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(header), line(tuple("-" * width for width in widths)), *map(line, rows)])


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spans", type=int, default=20_000, help="spans in the load (default 20000)")
    parser.add_argument("--clients", type=int, default=4, help="posting threads")
    parser.add_argument("--no-gzip", action="store_true", help="send uncompressed protobuf")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for each load")
    parser.add_argument("--pg-admin-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/11")
    parser.add_argument("--pool", choices=["prefork", "solo"], default="prefork", help="Celery worker pool")
    parser.add_argument("--py-spy", type=os.path.abspath, help="py-spy executable: profile web and workers")
    parser.add_argument("--profile-dir", type=os.path.abspath, help="where py-spy writes its flame graphs")


# The load shapes: "chats", each conversation one trace of chat spans in order (the suite's first load);
# "conversations", each conversation over several traces with an agent span per trace (issue 19);
# "fresh", the same shape with every call's messages new text and a random cache read (issue 37).
SHAPES = ("chats", "conversations", "fresh")


@dataclass
class Load:
    shape: str
    bodies: list[bytes]
    spans: list[int]  # spans in each body
    calls_per_span: float  # the share of the spans that are model calls


def build_load(total_spans: int, use_gzip: bool, shape: str = "chats") -> Load:
    started = time.perf_counter()
    if shape in ("conversations", "fresh"):
        raw = build_conversations(total_spans, fresh=shape == "fresh")
        total_spans, calls = conversation_spans(total_spans)
        counts = span_counts(total_spans)
    else:
        raw, calls, counts = build_batches(total_spans), total_spans, span_counts(total_spans)
    bodies = [gzip.compress(body, 6) for body in raw] if use_gzip else raw
    raw_size, sent_size = (sum(map(len, batches)) / total_spans for batches in (raw, bodies))
    took = time.perf_counter() - started
    print(
        f"load ({shape}): {total_spans} spans ({calls} model calls) in {len(raw)} batches of {BATCH_SIZE}, "
        f"built in {took:.1f}s: {raw_size:.0f} B/span protobuf, {sent_size:.0f} B/span sent",
        flush=True,
    )
    return Load(shape, bodies, counts, calls / total_spans)


def main() -> None:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--mode", choices=["embedded", "postgres", "all"], default="all")
    parser.add_argument("--workers", type=int, default=1, help="Celery worker processes (postgres mode)")
    parser.add_argument("--endpoint", help="OTLP/HTTP traces URL of another server: measure acceptance only")
    parser.add_argument("--key", help="Bearer key for --endpoint")
    parser.add_argument(
        "--protocol", choices=["http", "grpc", "both"], default="http", help="the ctxview receiver to load"
    )
    parser.add_argument("--shape", choices=SHAPES, default="chats", help="how the load's spans are arranged")
    add_load_arguments(parser)
    args = parser.parse_args()
    args.py_spy = Path(args.py_spy) if args.py_spy else None
    args.profile_dir = Path(args.profile_dir) if args.profile_dir else None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the children
    load = build_load(args.spans, not args.no_gzip, args.shape)
    bodies, spans = load.bodies, load.spans
    try:
        if args.endpoint:
            results = [load_endpoint(args.endpoint, args.key, bodies, spans, args)]
        else:
            modes = ["embedded", "postgres"] if args.mode == "all" else [args.mode]
            protocols = ["http", "grpc"] if args.protocol == "both" else [args.protocol]
            results = [
                load_ctxview(
                    mode,
                    args.workers,
                    bodies,
                    spans,
                    args,
                    protocol=protocol,
                    calls_per_span=load.calls_per_span,
                    shape=load.shape,
                )
                for mode in modes
                for protocol in protocols
            ]
    except KeyboardInterrupt:
        sys.exit("interrupted; everything started was stopped")
    print(format_table(LOAD_HEADER, [load_row(result) for result in results]))
    print()
    print(format_table(CPU_HEADER, [cpu_row(result) for result in results]))
    print(CPU_NOTE)
    for result in results:
        for note in result.notes:
            print(f"  {result.label}: {note}")


if __name__ == "__main__":
    main()
