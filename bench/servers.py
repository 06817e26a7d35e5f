"""Throwaway servers for the benchmarks: ctxview (embedded or PostgreSQL + Redis + Celery workers) and
Arize Phoenix (from a virtualenv of its own), each stopped with all its children at the end; and the
peak memory of their processes.
"""

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import redis
import requests

ROOT = Path(__file__).resolve().parent.parent
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


@contextlib.contextmanager
def child_process(
    args: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT
) -> Iterator[subprocess.Popen]:
    """A child in its own process group (Ctrl-C reaches us only), stopped with its children at exit."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            yield process
        finally:
            if Path(args[0]).name == "py-spy":  # it writes its output on SIGINT, not on SIGTERM
                with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                    process.send_signal(signal.SIGINT)
                    process.wait(timeout=60)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


# --- Memory and CPU ------------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class ProcessInfo:
    rss_kib: int
    cpu_seconds: float  # user + system, this process only
    pss_kib: int = 0  # proportional set size: pages shared with other processes counted as a share


def pss_kib(pid: int | str) -> int:
    """The process's PSS (0 if it is gone or unreadable): forked workers share the parent's pages."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass(frozen=True)
class Backends:
    """The PostgreSQL processes working for one database of the server whose postmaster is
    ``postmaster``: its client backends and autovacuum workers (their titles name the database), and
    the parallel workers those start ("parallel worker for PID n"); not the sessions in ``exclude`` (the
    benchmark's own), nor their parallel workers. ``postmaster`` 0: of any server on the machine."""

    database: str
    postmaster: int = 0
    exclude: frozenset[int] = frozenset()


@dataclass(frozen=True)
class PostgresShared:
    """The processes of the server whose postmaster is ``postmaster`` that serve all its databases:
    the postmaster itself and its children titled in ``POSTGRES_SHARED_TITLES``."""

    postmaster: int


POSTGRES_SHARED_TITLES = (
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "logical replication launcher",
    "archiver",
    "stats collector",
    "walsender",
)
POSTGRES_SHARED = "postgres-shared"  # the name of that group in ``Ctxview.memory_groups``

Group = set[int] | str | Backends | PostgresShared


def postgres_role(title: str) -> tuple[str, str]:
    """What a PostgreSQL process is, from its title ("postgres: [CLUSTER: ]USER DATABASE HOST STATE", or
    the command line it was started with): ("backend", database), ("autovacuum", database),
    ("parallel", leader pid), ("shared", ""), ("untitled", "") or ("other", "")."""
    if not title.startswith("postgres: "):
        # The postmaster, or a process it has just forked and not yet titled.
        return ("untitled", "") if "\0" in title.rstrip("\0") else ("other", "")
    rest = title.replace("\0", " ").strip().rpartition(": ")[2]
    words = rest.split()
    if rest.startswith(POSTGRES_SHARED_TITLES):
        return "shared", ""
    if rest.startswith("parallel worker for PID ") and len(words) > 4:
        return "parallel", words[4]
    if rest.startswith("autovacuum worker") and len(words) > 2:
        return "autovacuum", words[2]
    if len(words) >= 3:
        return "backend", words[1]
    return "other", ""


def parent_pid(pid: int) -> int:
    """The parent of a live process (0 if it is gone, or not on this machine)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


@dataclass
class Live:
    pid: int
    fields: list[str]  # /proc/PID/stat after the command name: state, ppid, pgrp, ...
    role: tuple[str, str] = ("", "")  # postgres_role() of a process named postgres

    @property
    def ppid(self) -> int:
        return int(self.fields[1])

    def info(self, pss: bool) -> ProcessInfo:
        # utime and stime are fields 14 and 15 of the whole line (11 and 12 here), rss 24 (21 here).
        cpu = (int(self.fields[11]) + int(self.fields[12])) / CLOCK_TICKS
        return ProcessInfo(int(self.fields[21]) * PAGE_KIB, cpu, pss_kib(self.pid) if pss else 0)


def members(member: Group, live: list[Live]) -> list[Live]:
    """The live processes of one group (see ``processes``)."""
    if isinstance(member, set):
        return [process for process in live if int(process.fields[2]) in member]
    if isinstance(member, PostgresShared):
        return [
            process
            for process in live
            if process.pid == member.postmaster
            or (process.ppid == member.postmaster and process.role[0] == "shared")
        ]
    if isinstance(member, str):  # a database name, as titles show it
        member = Backends(member.strip())
    server = [
        process
        for process in live
        if process.role[0] and (not member.postmaster or process.ppid == member.postmaster)
    ]
    leaders = {
        str(process.pid)
        for process in server
        if process.role in (("backend", member.database), ("autovacuum", member.database))
        and process.pid not in member.exclude
    }
    return [
        process
        for process in server
        if str(process.pid) in leaders or (process.role[0] == "parallel" and process.role[1] in leaders)
    ]


def processes(groups: dict[str, Group]) -> dict[str, dict[int, ProcessInfo]]:
    """Live processes of each group: a set of process group ids; a ``Backends`` (or a database name):
    the PostgreSQL processes working for that database; or a ``PostgresShared``."""
    live: list[Live] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                command, _, rest = stat.read().partition(" (")[2].rpartition(")")
            process = Live(int(entry.name), rest.split())
            if command == "postgres":
                with open(f"/proc/{entry.name}/cmdline") as cmdline:
                    process.role = postgres_role(cmdline.read())
        except OSError:  # gone meanwhile
            continue
        live.append(process)
    return {
        name: {process.pid: process.info(pss=isinstance(member, set)) for process in members(member, live)}
        for name, member in groups.items()
    }  # PSS of the server's own processes, not of PostgreSQL's (shared with every database)


def group_rss_kib(pgids: set[int]) -> dict[int, int]:
    """Resident memory (KiB) of every live process whose process group is in ``pgids``, by pid."""
    return {pid: info.rss_kib for pid, info in processes({"group": pgids})["group"].items()}


@dataclass
class Peaks:
    """Peak RSS of a group (largest process, largest total) and the CPU time its processes used."""

    process_kib: int = 0
    total_kib: int = 0
    cpu_by_pid: dict[int, float] = field(default_factory=dict)
    # Processes seen, then gone before the end: their CPU after their last sample is not counted.
    exited: set[int] = field(default_factory=set)

    @property
    def cpu_seconds(self) -> float:
        return sum(self.cpu_by_pid.values())

    def mib(self) -> str:
        return f"{self.process_kib / 1024:.0f}/{self.total_kib / 1024:.0f}" if self.total_kib else "-"


# The process groups whose CPU is the server's: web (gunicorn), the OTLP/gRPC receiver, workers and
# the PostgreSQL processes working for their database. Not "postgres-shared": those serve every
# database of the cluster (the machine's other users too), so they are shown apart, never summed in.
SERVER_GROUPS = ("web", "grpc", "worker", "postgres")


@dataclass
class MemorySampler:
    """Samples the processes of named groups in a thread: peak RSS, and CPU time since the start."""

    groups: dict[str, Group] = field(default_factory=dict)
    interval: float = 0.25
    peaks: dict[str, Peaks] = field(default_factory=dict)
    pss_peak_kib: int = 0  # the largest PSS of the sampled server processes together (not PostgreSQL)
    pss_groups: tuple[str, ...] | None = None  # the groups whose PSS that sums (None: every process group)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._cpu_at_start: dict[int, float] = {}
        self._lock = threading.Lock()  # sample() from the thread and from server_cpu_seconds()

    def sample(self) -> None:
        now = processes(self.groups)
        pss = [found for name, found in now.items() if self.pss_groups is None or name in self.pss_groups]
        self.pss_peak_kib = max(
            self.pss_peak_kib, sum(info.pss_kib for found in pss for info in found.values())
        )
        for name, found in now.items():
            peak = self.peaks.setdefault(name, Peaks())
            if isinstance(self.groups[name], set):  # PostgreSQL's processes are shared: their RSS says little
                peak.process_kib = max(peak.process_kib, max((p.rss_kib for p in found.values()), default=0))
                peak.total_kib = max(peak.total_kib, sum(p.rss_kib for p in found.values()))
            peak.exited |= peak.cpu_by_pid.keys() - found.keys()
            for pid, info in found.items():
                start = self._cpu_at_start.setdefault(pid, info.cpu_seconds if self._first else 0.0)
                peak.cpu_by_pid[pid] = info.cpu_seconds - start
        self._first = False

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                self.sample()

    def server_cpu_seconds(self) -> float:
        """CPU time of the server's groups (``SERVER_GROUPS``) since the start, sampled now."""
        with self._lock:
            self.sample()
            return sum(self.peaks[name].cpu_seconds for name in SERVER_GROUPS if name in self.peaks)

    def __enter__(self) -> "MemorySampler":
        self._first = True  # CPU already used by processes alive now is not the load's
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


# --- ctxview -------------------------------------------------------------------------------------


@dataclass
class Progress:
    """Where a ctxview instance is with what it accepted."""

    pending_batches: int
    failed_batches: int
    spans: int
    calls: int
    numbered_calls: int  # sum of the runs' call counts
    runs: int
    runs_behind: int  # runs whose analysed_seq < call_count


PROGRESS_SQL = """
SELECT (SELECT count(*) FROM ingest_rawbatch WHERE status = 'pending'),
       (SELECT count(*) FROM ingest_rawbatch WHERE status = 'failed'),
       (SELECT count(*) FROM ingest_span),
       (SELECT count(*) FROM ingest_call),
       (SELECT coalesce(sum(call_count), 0) FROM ingest_run),
       (SELECT count(*) FROM ingest_run),
       (SELECT count(*) FROM ingest_run WHERE analysed_seq < call_count)
"""


# The bench's own session (this query) aside; "active" includes those waiting.
SESSIONS_SQL = """
SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FILTER (WHERE state = 'active')
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


@dataclass
class Ctxview:
    """A running throwaway ctxview."""

    label: str
    base_url: str
    key: str
    env: dict[str, str]
    folder: Path
    web_pgid: int
    worker_pgids: list[int]
    execute: Callable[[str], list[tuple]]

    @property
    def traces_url(self) -> str:
        return f"{self.base_url}/v1/traces"

    def progress(self) -> Progress:
        return Progress(*(int(value) for value in self.execute(PROGRESS_SQL)[0]))

    def sessions(self) -> tuple[int, int]:
        """The instance's database sessions now: (waiting on a lock, running a statement)."""
        waiting, active = self.execute(SESSIONS_SQL)[0]
        return int(waiting), int(active)

    database: str = ""
    grpc_target: str = ""  # host:port of its OTLP/gRPC receiver, when started
    grpc_pgid: int = 0
    bench_backend_pid: int = 0  # the PostgreSQL session of ``execute`` (the benchmark's polls)

    def memory_groups(self) -> dict[str, Group]:
        """The process groups to sample: "web" (gunicorn, its master and workers), "grpc" (the OTLP/gRPC
        receiver, when started), "worker" (the Celery node and its pool), "postgres" (the backends of
        the instance's database, the benchmark's own session aside) and "postgres-shared"."""
        groups: dict[str, Group] = {"web": {self.web_pgid}}
        if self.grpc_pgid:
            groups["grpc"] = {self.grpc_pgid}
        if self.worker_pgids:
            groups["worker"] = set(self.worker_pgids)
        # The server whose postmaster started the benchmark's own session (none when it runs elsewhere).
        postmaster = parent_pid(self.bench_backend_pid) if self.database else 0
        if postmaster:
            groups["postgres"] = Backends(self.database, postmaster, frozenset({self.bench_backend_pid}))
            groups[POSTGRES_SHARED] = PostgresShared(postmaster)
        return groups

    def manage(self, *args: str) -> str:
        return manage(self.env, *args)


def manage(env: dict[str, str], *args: str) -> str:
    command = [sys.executable, "manage.py", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def postgres_database(admin_url: str, prefix: str = "ctxview_bench") -> Iterator[str]:
    name = f"{prefix}_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def django_in_process(admin_url: str) -> Iterator[None]:
    """Django set up in this process on a throwaway PostgreSQL database, migrated, with Celery tasks run
    in-process (no broker): for the benchmarks that time ctxview's own code without its servers."""
    with postgres_database(admin_url) as url:
        os.environ["DATABASE_URL"] = url
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ["DJANGO_SETTINGS_MODULE"] = "ctxview.settings"
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        try:
            call_command("migrate", verbosity=0)
            yield
        finally:
            connections.close_all()  # else the database cannot be dropped


def _sqlite_executor(path: Path) -> Callable[[str], list[tuple]]:
    connection = sqlite3.connect(path, timeout=30, check_same_thread=False)

    def execute(sql: str) -> list[tuple]:
        for _attempt in range(50):
            try:
                return connection.execute(sql).fetchall()
            except sqlite3.OperationalError as exc:  # locked by a writer for longer than the timeout
                if "locked" not in str(exc):
                    raise
                time.sleep(0.1)
        raise RuntimeError("the SQLite database stayed locked")

    return execute


@contextlib.contextmanager
def throwaway_ctxview(
    mode: str,
    workers: int = 1,
    pg_admin_url: str = "postgres://postgres@127.0.0.1:5432/postgres",
    redis_url: str = "redis://127.0.0.1:6379/11",
    web_workers: int = 2,
    web_threads: int = 4,
    profile_dir: Path | None = None,
    py_spy: Path | None = None,
    pool: str = "prefork",
    grpc: bool = False,
) -> Iterator[Ctxview]:
    """Start ctxview in ``mode`` (``embedded`` or ``postgres``) under gunicorn, with ``workers`` Celery
    worker processes in postgres mode, and with ``grpc`` its OTLP/gRPC receiver (one process, as many
    threads as gunicorn has in all). ``py_spy``: record the stacks of each into ``profile_dir``."""
    label = f"ctxview PostgreSQL, {workers} worker{'s' * (workers > 1)}"
    if mode == "embedded":
        label = "ctxview embedded (SQLite)"
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"ctxview-bench-{mode}-")))
        # No backpressure: measure how fast ctxview goes, not when it starts refusing.
        env = {
            **os.environ,
            "CTXVIEW_DATA_DIR": str(folder / "data"),
            "CTXVIEW_INGEST_MAX_PENDING_BATCHES": "0",
            "CTXVIEW_LOG_LEVEL": "WARNING",
        }
        for name in ("DATABASE_URL", "CELERY_BROKER_URL"):  # embedded unless we say otherwise
            env.pop(name, None)
        if mode == "postgres":
            env["DATABASE_URL"] = stack.enter_context(postgres_database(pg_admin_url))
            env["CELERY_BROKER_URL"] = redis_url
            broker = redis.Redis.from_url(redis_url)
            # Two benchmarks on one Redis database would take each other's tasks: one at a time.
            if not broker.set("ctxview-bench-lock", os.getpid(), nx=True, ex=3600):
                holder = broker.get("ctxview-bench-lock")
                raise RuntimeError(
                    f"process {holder} runs a benchmark on {redis_url}: use another --redis-url"
                )
            stack.callback(lambda: broker.delete("ctxview-bench-lock"))
            broker.flushdb()  # no tasks left over from an earlier run (the lock goes too: set it again)
            broker.set("ctxview-bench-lock", os.getpid(), ex=3600)
            stack.callback(broker.flushdb)
        manage(env, "migrate", "--noinput")
        key = manage(env, "createproject", "bench").strip().splitlines()[-1]

        def profiled(name: str, args: list[str]) -> list[str]:
            if py_spy is None or profile_dir is None:
                return args
            # Collapsed stacks ("raw"): bench/stacks.py sums them by function.
            output = profile_dir / f"{mode}-{workers}-{name}.txt"
            record = [str(py_spy), "record", "--subprocesses", "--rate", "100", "--format", "raw"]
            return [*record, "-o", str(output), "--", *args]

        worker_pgids = []
        if mode == "postgres":
            from celery import Celery

            # As docker-compose.yml runs it: one worker node whose pool forks ``workers`` processes, so
            # they share what the node loaded before forking (the app, the tokenizer).
            node = f"bench-{os.getpid()}@localhost"
            worker = f"-m celery -A ctxview worker --pool={pool} --concurrency={workers} --loglevel=WARNING"
            worker += f" --without-gossip --without-mingle --without-heartbeat -n {node}"
            args = profiled("worker", [sys.executable, *worker.split()])
            worker_pgids.append(stack.enter_context(child_process(args, env, folder / "worker.log")).pid)
            # Wait until the node answers, so worker start-up is not part of the timings.
            control = Celery(broker=redis_url).control
            wait_for(lambda: len(control.ping(destination=[node], timeout=0.5)) == 1, "workers")

        port = free_port()
        # deploy/gunicorn.conf.py as in production (the app loaded before forking), at this size.
        web = f"-m gunicorn ctxview.wsgi:application -c deploy/gunicorn.conf.py -b 127.0.0.1:{port}"
        web += f" --workers {web_workers} --threads {web_threads}"
        args = profiled("web", [sys.executable, *web.split()])
        gunicorn = stack.enter_context(child_process(args, env, folder / "web.log"))
        base_url = f"http://127.0.0.1:{port}"

        def web_answers() -> bool:
            if gunicorn.poll() is not None:
                raise RuntimeError("gunicorn exited:\n" + (folder / "web.log").read_text()[-3000:])
            with contextlib.suppress(requests.RequestException):  # not listening yet, or still loading
                return requests.get(f"{base_url}/v1/traces", timeout=5).status_code == 405
            return False

        wait_for(web_answers, "gunicorn")

        grpc_target, grpc_pgid = "", 0
        if grpc:
            grpc_target = f"127.0.0.1:{free_port()}"
            serve = f"manage.py serve_otlp_grpc --bind {grpc_target} --threads {web_workers * web_threads}"
            args = profiled("grpc", [sys.executable, *serve.split()])
            receiver = stack.enter_context(child_process(args, env, folder / "grpc.log"))
            grpc_pgid = receiver.pid

            def grpc_answers() -> bool:
                if receiver.poll() is not None:
                    raise RuntimeError(
                        "serve_otlp_grpc exited:\n" + (folder / "grpc.log").read_text()[-3000:]
                    )
                return grpc_serving(grpc_target)

            wait_for(grpc_answers, "the OTLP/gRPC receiver")

        if mode == "postgres":
            connection = stack.enter_context(psycopg.connect(env["DATABASE_URL"], autocommit=True))
            # No parallel workers for the benchmark's polls: they would be PostgreSQL CPU of no group.
            connection.execute("SET max_parallel_workers_per_gather = 0")
            bench_backend_pid = connection.info.backend_pid

            def execute(sql: str) -> list[tuple]:
                return connection.execute(sql).fetchall()
        else:
            execute = _sqlite_executor(folder / "data" / "ctxview.sqlite3")
            bench_backend_pid = 0
        database = env["DATABASE_URL"].rsplit("/", 1)[1] if mode == "postgres" else ""
        yield Ctxview(
            label,
            base_url,
            key,
            env,
            folder,
            gunicorn.pid,
            worker_pgids,
            execute,
            database,
            grpc_target,
            grpc_pgid,
            bench_backend_pid,
        )


def grpc_serving(target: str) -> bool:
    """True once the gRPC health service at ``target`` answers SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


# --- Arize Phoenix -------------------------------------------------------------------------------

PHOENIX_COUNT_QUERY = "{ projects { edges { node { name recordCount } } } }"


@dataclass
class Phoenix:
    """A running throwaway Phoenix."""

    base_url: str
    pgid: int
    folder: Path
    database: str = "SQLite"  # or PostgreSQL

    @property
    def traces_url(self) -> str:
        return f"{self.base_url}/v1/traces"

    def span_count(self) -> int:
        """Spans Phoenix answers for through its GraphQL API (what its UI queries)."""
        response = requests.post(f"{self.base_url}/graphql", json={"query": PHOENIX_COUNT_QUERY}, timeout=60)
        response.raise_for_status()
        edges = response.json()["data"]["projects"]["edges"]
        return sum(edge["node"]["recordCount"] for edge in edges)

    def version(self) -> str:
        with contextlib.suppress(requests.RequestException, ValueError):
            return requests.get(f"{self.base_url}/arize_phoenix_version", timeout=5).text.strip()
        return "?"


@contextlib.contextmanager
def throwaway_phoenix(venv: Path, port: int = 6006, pg_admin_url: str = "") -> Iterator[Phoenix]:
    """``phoenix serve`` from ``venv`` with a fresh working directory; its OTLP/HTTP receiver on ``port``.

    ``pg_admin_url``: on a throwaway PostgreSQL database (Phoenix's production setup), else SQLite."""
    executable = venv / "bin" / "phoenix"
    if not executable.exists():
        raise RuntimeError(f"{executable} not found: pip install arize-phoenix into {venv} first")
    if not port_is_free(port):
        port = free_port()
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="phoenix-bench-")))
        database = ""
        if pg_admin_url:
            database = stack.enter_context(postgres_database(pg_admin_url, "phoenix_bench"))
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("PHOENIX_", "OTEL_", "DATABASE_URL", "VIRTUAL_ENV"))
        }
        env |= {
            "PATH": f"{venv / 'bin'}:{env.get('PATH', '')}",
            "PHOENIX_WORKING_DIR": str(folder),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        }
        if database:  # Phoenix (SQLAlchemy) takes only the postgresql:// spelling
            env["PHOENIX_SQL_DATABASE_URL"] = "postgresql://" + database.split("://", 1)[1]
        log = folder.parent / f"{folder.name}.log"
        process = stack.enter_context(child_process([str(executable), "serve"], env, log, cwd=folder))
        stack.callback(lambda: log.unlink(missing_ok=True))
        kind = "PostgreSQL" if database else "SQLite"
        phoenix = Phoenix(f"http://127.0.0.1:{port}", process.pid, folder, kind)

        def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError("phoenix exited:\n" + log.read_text(errors="replace")[-3000:])
            with contextlib.suppress(requests.RequestException, KeyError, ValueError):
                phoenix.span_count()
                return True
            return False

        wait_for(ready, "phoenix", timeout=180)
        yield phoenix
