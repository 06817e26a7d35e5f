"""A private ctxview stack for fault tests: its own PostgreSQL cluster (and pgbouncer, where a test puts one
in front of it) and Redis server (so restarting or killing them disturbs nobody else), gunicorn and Celery
worker processes, an OTLP load sent with the real OTLPSpanExporter, and the count of what became of every
acknowledged span.
"""

import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests import services

ROOT = services.ROOT


def _run(args: list[str], **options) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, **options)
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done


# --- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bin() -> Path | None:
    """The bin folder of the newest PostgreSQL server installed (Debian's layout), or one on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(path.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PrivatePostgres:
    """A throwaway PostgreSQL cluster on a free port, owned by the test session.

    initdb refuses to run as root: as root the cluster belongs to the ``postgres`` user. ``host``: the
    address it listens on besides 127.0.0.1 and clients are told to use; ``prefix``: what its commands
    run under (``ip netns exec NAME``: on another host of tests/multihost)."""

    def __init__(self, bin_dir: Path, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.bin = bin_dir
        self.host = host
        self.prefix = list(prefix)
        self.folder = Path(tempfile.mkdtemp(prefix="ctxfault-pg-"))
        self.data = self.folder / "data"
        self.log_path = self.folder / "postgres.log"
        self.port = services.free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._pg(
            [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
        )

    def _pg(self, args: list[str]) -> subprocess.CompletedProcess:
        return _run(self.prefix + self.as_user + args, cwd=self.folder)

    def start(self) -> None:
        listen = ",".join(dict.fromkeys(["127.0.0.1", self.host]))
        options = (
            f"-c port={self.port} -c listen_addresses={listen} -c unix_socket_directories={self.folder} "
            "-c max_connections=200 -c log_min_error_statement=error"
        )
        self._pg(
            [
                str(self.bin / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log_path),
                "-o",
                options,
                "-w",
                "start",
            ]
        )

    def stop(self, mode: str = "fast") -> None:
        self._pg([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"])

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass  # not running
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgres://postgres@{self.host}:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as connection:
            connection.execute(sql)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


# --- PgBouncer -----------------------------------------------------------------------------------


def pgbouncer_bin() -> str | None:
    """Debian's pgbouncer (in /usr/sbin, often not on a user's PATH), or one on PATH."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")


class PgBouncer:
    """A pgbouncer of the test's own on a free port, in front of every database of ``postgres``
    (``* =``), pooling ``pool_mode`` with at most ``pool_size`` server connections a database.

    Like initdb, pgbouncer refuses to run as root: as root it runs as ``postgres``."""

    def __init__(self, binary: str, postgres: PrivatePostgres, pool_mode: str, pool_size: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ctxfault-pgbouncer-"))
        self.port = services.free_port()
        # What ctxview is told when it connects through this pgbouncer (its settings for transaction pooling).
        self.env = {"CTXVIEW_PGBOUNCER": "1"} if pool_mode == "transaction" else {}
        (self.folder / "userlist.txt").write_text('"postgres" ""\n')
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            f"""[databases]
* = host=127.0.0.1 port={postgres.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.folder / "userlist.txt"}
admin_users = postgres
pool_mode = {pool_mode}
default_pool_size = {pool_size}
max_db_connections = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
pidfile = {self.folder / "pgbouncer.pid"}
"""
        )
        args = [binary, str(ini)]
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            for path in (self.folder, *self.folder.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            args[1:1] = ["-u", "postgres"]
        self.process = services.Process("faults-pgbouncer", args, dict(os.environ))
        services.wait_for(self._answers, 20, "pgbouncer to answer on its admin console")

    def _answers(self) -> bool:
        assert self.process.alive(), f"pgbouncer exited:\n{self.process.log()}"
        try:
            self.show("VERSION")
        except psycopg.OperationalError:
            return False
        return True

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def show(self, what: str) -> list[dict]:
        """``SHOW what`` on the admin console (simple query protocol only: a client-side cursor)."""
        with psycopg.connect(
            self.url("pgbouncer"), autocommit=True, cursor_factory=psycopg.ClientCursor, connect_timeout=5
        ) as connection:
            cursor = connection.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def stop(self) -> None:
        self.process.stop()  # its log (stderr) stays in test-artifacts/faults-pgbouncer.log
        shutil.rmtree(self.folder, ignore_errors=True)


# --- Redis ---------------------------------------------------------------------------------------


class PrivateRedis:
    """A throwaway redis-server without persistence: killing it loses every message it held. ``host``
    and ``prefix`` as for PrivatePostgres."""

    def __init__(self, name: str, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()) -> None:
        self.port = services.free_port()
        self.name = name
        self.host = host
        self.prefix = list(prefix)
        self.process: services.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> None:
        args = self.prefix + [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        if self.host != "127.0.0.1":  # its clients are on other hosts (of a private bridge: tests/multihost)
            args += ["--protected-mode", "no"]
        self.process = services.Process(f"faults-{self.name}-redis", args, dict(os.environ))
        services.wait_for(self._answers, 20, "redis-server to answer")

    def _answers(self) -> bool:
        ping = self.prefix + ["redis-cli", "-h", self.host, "-p", str(self.port), "ping"]
        done = subprocess.run(ping, capture_output=True, text=True)
        return done.stdout.strip() == "PONG"

    def kill(self) -> None:
        """SIGKILL: a crash, with every queued and unacknowledged message lost."""
        assert self.process is not None
        self.process.popen.send_signal(signal.SIGKILL)
        self.process.popen.wait()
        self.process.stop()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# --- ctxview processes ---------------------------------------------------------------------------


def manage(env: dict[str, str], *args: str, prefix: tuple[str, ...] = ()) -> str:
    return _run([*prefix, sys.executable, "manage.py", *args], cwd=ROOT, env=env).stdout


class Worker:
    """A Celery worker process; its database sessions are named ``name`` (application_name). ``prefix``:
    what it runs under (``ip netns exec NAME``: on another host)."""

    def __init__(
        self, env: dict[str, str], name: str, pool: str = "solo", prefix: tuple[str, ...] = ()
    ) -> None:
        self.name = name
        self.node = f"{name}-{os.getpid()}@localhost"
        args = [
            *prefix,
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ctxview",
            "worker",
            f"--pool={pool}",
            "--concurrency=1",
        ]
        args += [
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            self.node,
        ]
        self.process = services.Process(f"faults-{name}", args, env | {"PGAPPNAME": name})

        # Ready when it says so. (A control ping cannot be used: in a process where Django's Celery app is
        # loaded, a ping through another broker than the configured one gets no reply.)
        def ready():
            assert self.process.alive(), f"worker exited:\n{self.process.log()}"
            return f"{self.node} ready." in self.process.log()

        services.wait_for(ready, 60, f"worker {name} to answer a ping")

    @property
    def pid(self) -> int:
        return self.process.popen.pid

    def pool_children(self) -> list[int]:
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        return [int(pid) for pid in path.read_text().split()] if path.exists() else []

    def kill(self) -> None:
        self.process.popen.send_signal(signal.SIGKILL)
        self.process.popen.wait()
        self.process.stop()

    def stop(self) -> None:
        self.process.stop()


def start_web(
    env: dict[str, str], name: str, host: str = "127.0.0.1", prefix: tuple[str, ...] = ()
) -> tuple[services.Process, str]:
    port = services.free_port()
    args = [*prefix, sys.executable, "-m", "gunicorn", "ctxview.wsgi:application", "-b", f"{host}:{port}"]
    args += ["--workers", "2", "--threads", "4", "--timeout", "120"]
    process = services.Process(f"faults-{name}-web", args, env)
    url = f"http://{host}:{port}"

    def ready():
        assert process.alive(), f"gunicorn exited:\n{process.log()}"
        try:
            return requests.get(f"{url}/v1/traces", timeout=5).status_code == 405
        except requests.RequestException:
            return False

    services.wait_for(ready, 60, "gunicorn to answer")
    return process, url


# --- The load ------------------------------------------------------------------------------------


def make_batches(
    batches: int, spans_per_batch: int, conversations: int, seed: int, cache: bool = False
) -> list[list]:
    """Finished SDK chat spans, ``spans_per_batch`` a batch, each call of a conversation resending its
    history (the last 6 messages). ``cache``: with a long system prompt, which changes at each
    conversation's 10th call, and prompt-cache reads reported (none at the first call and at the change):
    cache breaks for the analysis to find."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"fault-agent-{seed}"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tests.faults", "1.0")
    histories: dict[int, list[dict]] = {number: [] for number in range(conversations)}
    for index in range(batches * spans_per_batch):
        number = index % conversations
        history = histories[number]
        history.append(
            {"role": "user", "parts": [{"type": "text", "content": f"step {index} of agent {seed}-{number}"}]}
        )
        with tracer.start_as_current_span(f"chat m{number}") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", "anthropic")
            span.set_attribute("gen_ai.request.model", "m1")
            span.set_attribute("gen_ai.conversation.id", f"fault-{seed}-{number}")
            span.set_attribute("gen_ai.input.messages", json.dumps(history[-6:]))
            span.set_attribute("gen_ai.usage.input_tokens", 500 + index)
            span.set_attribute("gen_ai.usage.output_tokens", 20)
            if cache:
                call = index // conversations  # of this conversation, from 0
                brief = " Be brief." if call >= 9 else ""
                span.set_attribute(
                    "gen_ai.system_instructions", f"You are agent {seed}-{number}.{brief}" + " Rules." * 300
                )
                span.set_attribute("gen_ai.usage.input_tokens", 2000 + 40 * call)
                span.set_attribute(
                    "gen_ai.usage.cache_read.input_tokens", 0 if call in (0, 9) else 1500 + 40 * call
                )
        history.append({"role": "assistant", "parts": [{"type": "text", "content": f"done {index}"}]})
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    return [spans[start : start + spans_per_batch] for start in range(0, len(spans), spans_per_batch)]


def span_key(span) -> tuple[str, str]:
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")


@dataclass
class Load:
    """Client threads exporting their batches with OTLPSpanExporter, one every ``interval`` seconds."""

    url: str
    key: str
    batches_per_client: list[list[list]]
    interval: float
    acked: set = field(default_factory=set)
    sent: set = field(default_factory=set)
    exports: int = 0
    failed_exports: int = 0
    started: float = 0.0
    answers: Counter = field(default_factory=Counter)  # every HTTP answer (or error), retries included

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._client, args=(batches,), daemon=True)
            for batches in self.batches_per_client
        ]
        self.total = sum(len(batches) for batches in self.batches_per_client)

    def start(self) -> "Load":
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def new_exporter(self):
        """One client's exporter: OTLP/HTTP, its answers counted (a subclass may export another way)."""
        session = requests.Session()
        session.hooks["response"].append(self._answered)
        return OTLPSpanExporter(
            endpoint=f"{self.url}/v1/traces",
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=30,
            session=session,
        )

    def _client(self, batches: list[list]) -> None:
        exporter = self.new_exporter()
        next_export = time.monotonic()
        try:
            for spans in batches:
                keys = {span_key(span) for span in spans}
                result = exporter.export(spans)  # retries 429/502/503/504 itself, as in production
                with self.lock:
                    self.exports += 1
                    self.sent |= keys
                    if result == SpanExportResult.SUCCESS:  # a 200
                        self.acked |= keys
                    else:
                        self.failed_exports += 1
                next_export += self.interval
                time.sleep(max(0.0, next_export - time.monotonic()))
        finally:
            exporter.shutdown()

    def _answered(self, response, *args, **kwargs) -> None:
        with self.lock:
            self.answers[response.status_code] += 1

    def progress(self) -> float:
        with self.lock:
            return self.exports / self.total

    def wait_until(self, fraction: float, timeout: float = 300) -> None:
        services.wait_for(lambda: self.progress() >= fraction, timeout, f"{fraction:.0%} of the load", 0.05)

    def join(self, timeout: float = 600) -> None:
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in self.threads), "the load did not finish"


# --- A scenario's stack --------------------------------------------------------------------------


@dataclass
class Stack:
    name: str
    postgres: PrivatePostgres
    database: str
    redis: PrivateRedis
    env: dict[str, str]
    key: str
    web: services.Process
    url: str
    workers: list[Worker]
    prefix: tuple[str, ...] = ()  # what its commands (the sweeper) run under: a host of tests/multihost

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with psycopg.connect(
            self.postgres.url(self.database), autocommit=True, connect_timeout=5
        ) as connection:
            return connection.execute(sql, params).fetchall()

    def sweep(self) -> str:
        return manage(self.env, "sweepbatches", "--older-than", "0", prefix=self.prefix).strip()

    def stop(self) -> None:
        for process in [self.web, *self.workers]:
            process.stop()
        self.redis.stop()


def start_stack(
    postgres: PrivatePostgres,
    template: str,
    name: str,
    workers: list[tuple[str, str]],
    worker_env: dict | None = None,
    through: PgBouncer | None = None,
) -> Stack:
    """A new database from ``template``, a new Redis, gunicorn and the ``(name, pool)`` workers; they
    connect to the database ``through`` a pgbouncer when there is one (the test's queries do not)."""
    database = f"ctxfault_{name}"
    postgres.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    postgres.execute(f"CREATE DATABASE {database} TEMPLATE {template}")
    redis = PrivateRedis(name)
    redis.start()
    env = os.environ | {
        "DATABASE_URL": (through or postgres).url(database),
        "CELERY_BROKER_URL": redis.url,
        "CTXVIEW_INGEST_MAX_PENDING_BATCHES": "0",
        "CTXVIEW_LOG_LEVEL": "INFO",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CTXVIEW_REQUIRE_SERVICES", None)
    env |= through.env if through is not None else {}
    key = manage(env, "createproject", f"fault-{name}").strip().splitlines()[-1]
    started = [Worker(env | (worker_env or {}), f"{name}-{worker}", pool) for worker, pool in workers]
    web, url = start_web(env, name)
    return Stack(name, postgres, database, redis, env, key, web, url, started)


# --- The count -----------------------------------------------------------------------------------


@dataclass
class Tally:
    scenario: str
    fault: str
    exports: int
    failed_exports: int
    acknowledged: int
    stored: int
    duplicated: int
    lost: int
    stored_unacknowledged: int
    calls: int
    calls_missing: int
    runs: int
    runs_not_analysed: int
    runs_misnumbered: int
    batches_failed: int
    recovery_s: float

    def row(self) -> tuple[str, ...]:
        return (
            self.scenario,
            f"{self.exports - self.failed_exports}/{self.exports}",
            str(self.acknowledged),
            str(self.stored),
            str(self.duplicated),
            str(self.lost),
            f"{self.calls - self.calls_missing}/{self.calls} in {self.runs} runs",
            f"{self.runs - self.runs_not_analysed}/{self.runs}",
            str(self.stored_unacknowledged),
            f"{self.recovery_s:.0f}",
            self.fault,
        )


HEADER = (
    "scenario",
    "exports acked",
    "acknowledged",
    "stored",
    "duplicated",
    "lost",
    "calls (of acked spans)",
    "runs analysed",
    "stored unacked",
    "recovery s",
    "fault",
)


def settled(stack: Stack) -> bool:
    """Nothing pending, every call numbered, every run analysed up to its last call."""
    try:
        pending, unnumbered, behind = stack.query(
            "SELECT (SELECT count(*) FROM ingest_rawbatch WHERE status = 'pending'),"
            " (SELECT count(*) FROM ingest_call WHERE seq IS NULL),"
            " (SELECT count(*) FROM ingest_run WHERE analysed_seq <> call_count)"
        )[0]
    except psycopg.OperationalError:
        return False
    return pending == unnumbered == behind == 0


def recover(stack: Stack, timeout: float = 300) -> float:
    """Run the sweeper until everything is processed and analysed; returns the seconds it took."""
    started = time.monotonic()
    while not settled(stack):
        assert time.monotonic() - started < timeout, f"not recovered after {timeout} s"
        stack.sweep()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not settled(stack):
            time.sleep(0.5)
    return time.monotonic() - started


def tally(
    stack: Stack, load: Load, scenario: str, fault: str, recovery_s: float, scoped: bool = False
) -> Tally:
    """``scoped``: count only the load's traces and their runs (a database that holds other loads too)."""
    params = (sorted({trace for trace, _ in load.sent}),) if scoped else ()
    where = " WHERE trace_id = ANY(%s)" if scoped else ""
    spans = stack.query("SELECT trace_id, span_id FROM ingest_span" + where, params)
    stored_keys = set(spans)
    calls = stack.query("SELECT trace_id, span_id FROM ingest_call" + where, params)
    call_keys = set(calls)
    runs_where = f" WHERE r.id IN (SELECT run_id FROM ingest_call{where})" if scoped else ""
    runs = stack.query(
        "SELECT r.id, r.call_count, r.analysed_seq, count(c.id), count(DISTINCT c.seq),"
        " min(c.seq), max(c.seq)"
        f" FROM ingest_run r LEFT JOIN ingest_call c ON c.run_id = r.id{runs_where} GROUP BY r.id",
        params,
    )
    misnumbered = [
        run
        for run in runs
        if not (run[1] == run[3] == run[4] and (run[3] == 0 or (run[5], run[6]) == (1, run[1])))
    ]
    failed = stack.query("SELECT count(*) FROM ingest_rawbatch WHERE status = 'failed'")[0][0]
    acked = load.acked
    return Tally(
        scenario=scenario,
        fault=fault,
        exports=load.exports,
        failed_exports=load.failed_exports,
        acknowledged=len(acked),
        stored=len(acked & stored_keys),
        duplicated=(len(spans) - len(stored_keys)) + (len(calls) - len(call_keys)),
        lost=len(acked - stored_keys),
        stored_unacknowledged=len(stored_keys - acked),
        calls=len(acked),
        calls_missing=len(acked - call_keys),
        runs=len(runs),
        runs_not_analysed=sum(1 for run in runs if run[2] != run[1]),
        runs_misnumbered=len(misnumbered),
        batches_failed=failed,
        recovery_s=recovery_s,
    )


def format_table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[column]) for row in [HEADER, *rows]) for column in range(len(HEADER))]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)) + " |"

    return "\n".join([line(HEADER), line(tuple("-" * width for width in widths)), *map(line, rows)])
