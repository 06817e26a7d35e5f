"""ctxview deployed over the hosts of tests/multihost/network.py: PostgreSQL and Redis on one, nginx in
front of gunicorn and the OTLP/gRPC receiver on another, Celery workers on the rest; the OTLP load sent
through both receivers from the root namespace; what each run became (its calls' numbers and turns, the
analyses), to compare two deployments' databases.
"""

import os
import shutil
import tempfile
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

from ingest.compact import unpack_json
from tests import services
from tests.faults import stack
from tests.multihost.network import Host

LOCK_IDLE_SECONDS = 5


# --- The database host ---------------------------------------------------------------------------


def start_postgres(bin_dir: Path, db: Host, subnet: str) -> stack.PrivatePostgres:
    """A private cluster on the db host, listening on its bridge address, trusting the subnet's hosts."""
    postgres = stack.PrivatePostgres(bin_dir, host=db.address, prefix=db.prefix)
    try:
        with (postgres.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {subnet} trust\n")
        postgres.start()
    except BaseException:
        postgres.destroy()
        raise
    return postgres


def migrated_template(postgres: stack.PrivatePostgres, db: Host) -> str:
    name = "ctxmh_template"
    postgres.execute(f"CREATE DATABASE {name}")
    env = os.environ | {"DATABASE_URL": postgres.url(name)}
    env.pop("CELERY_BROKER_URL", None)
    stack.manage(env, "migrate", "--noinput", "-v0", prefix=db.prefix)
    return name


# --- The ingest host -----------------------------------------------------------------------------


def start_nginx(host: Host, name: str, upstream: str) -> tuple[services.Process, str]:
    """Debian's nginx with deploy/nginx's server config (filled in by services.nginx_config),
    on ``host``'s bridge address, in front of gunicorn at ``upstream``."""
    port = services.free_port()
    folder = Path(tempfile.mkdtemp(prefix=f"ctxmh-nginx-{name}-"))
    config = services.nginx_config(folder, upstream, f"{host.address}:{port}", "stderr")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    args = [*host.prefix, nginx, "-c", str(config)]
    process = services.Process(f"multihost-{name}-nginx", args, dict(os.environ))
    process.folder = folder  # removed when it stops (Deployment.stop)
    url = f"http://{host.address}:{port}"

    def answers():
        assert process.alive(), f"nginx exited:\n{process.log()}"
        try:
            return requests.get(f"{url}/v1/traces", timeout=5).status_code == 405
        except requests.RequestException:
            return False

    services.wait_for(answers, 60, f"nginx on {host.name} to answer")
    return process, url


def start_grpc(host: Host, env: dict[str, str], name: str) -> tuple[services.Process, str]:
    """``manage.py serve_otlp_grpc`` on ``host``'s bridge address, once its health service says SERVING."""
    process, port = services.start_grpc(env, f"multihost-{name}-grpc", host=host.address, prefix=host.prefix)
    return process, f"{host.address}:{port}"


# --- A deployment --------------------------------------------------------------------------------


@dataclass
class Deployment:
    """``stack``: its database, Redis, gunicorn, workers and the sweeper (on the ingest host), its url
    nginx's; ``grpc_target``: the gRPC receiver's host:port."""

    stack: stack.Stack
    nginx: services.Process
    grpc: services.Process
    grpc_target: str
    worker_hosts: dict[str, Host]
    sent: list[str] = field(default_factory=list)  # the loads sent to it, by name
    lock: threading.Lock = field(default_factory=threading.Lock)

    def worker(self, host: str) -> stack.Worker:
        return next(worker for worker in self.stack.workers if worker.name.endswith(f"-{host}"))

    def start_worker(self, host: str) -> stack.Worker:
        """A Celery worker (prefork, one pool process: two processes) on ``host``, in place of the last."""
        name = f"multihost-{self.stack.name}-{host}"
        worker = stack.Worker(self.stack.env, name, "prefork", prefix=self.worker_hosts[host].prefix)
        with self.lock:  # workers start side by side
            self.stack.workers = [old for old in self.stack.workers if old.name != name] + [worker]
        return worker

    def stop(self) -> None:
        """Whatever of it started (a deployment that failed to start half-way too)."""
        for process in [self.nginx, self.grpc, self.stack.web, *self.stack.workers]:
            if process is not None:
                process.stop()
        if self.nginx is not None:
            shutil.rmtree(self.nginx.folder, ignore_errors=True)
        self.stack.redis.stop()


def deploy(
    name: str,
    postgres: stack.PrivatePostgres,
    template: str,
    db: Host,
    ingest: Host,
    worker_hosts: dict[str, Host],
    allowed_hosts: list[str],
) -> Deployment:
    """A database from ``template`` and a Redis on ``db``, the receivers on ``ingest``, a worker on each
    of ``worker_hosts`` (one host may be all three: a single-host deployment)."""
    for log in services.ARTIFACTS.glob(f"*multihost-{name}-*.log"):  # this session's alone
        log.unlink()
    database = f"ctxmh_{name}"
    postgres.execute(f"CREATE DATABASE {database} TEMPLATE {template}")
    redis = stack.PrivateRedis(f"multihost-{name}", host=db.address, prefix=db.prefix)
    redis.start()
    env = os.environ | {
        "DATABASE_URL": postgres.url(database),
        "CELERY_BROKER_URL": redis.url,
        "CTXVIEW_ALLOWED_HOSTS": ",".join(allowed_hosts),
        "CTXVIEW_INGEST_MAX_PENDING_BATCHES": "0",
        "CTXVIEW_LOG_LEVEL": "INFO",
        # A worker host cut off mid-batch releases its locks this soon (ingest/locks.py; 30 s by default),
        # well inside the test's cut.
        "CTXVIEW_LOCK_IDLE_SECONDS": str(LOCK_IDLE_SECONDS),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CTXVIEW_REQUIRE_SERVICES", None)
    created = stack.manage(env, "createproject", f"multihost-{name}", prefix=ingest.prefix)
    key = created.strip().splitlines()[-1]
    deployment = Deployment(
        stack.Stack(name, postgres, database, redis, env, key, None, "", [], prefix=ingest.prefix),
        nginx=None,
        grpc=None,
        grpc_target="",
        worker_hosts=worker_hosts,
    )
    try:
        start_processes(deployment, ingest)
    except BaseException:
        deployment.stop()
        raise
    return deployment


def start_processes(deployment: Deployment, ingest: Host) -> None:
    """The workers, gunicorn and the gRPC receiver side by side (each takes seconds to import Django),
    then nginx in front of gunicorn. What started is on ``deployment`` (to stop) even when one failed."""
    target = deployment.stack
    with ThreadPoolExecutor(len(deployment.worker_hosts) + 2) as starting:
        workers = [starting.submit(deployment.start_worker, host) for host in deployment.worker_hosts]
        web_name = f"multihost-{target.name}"
        web = starting.submit(stack.start_web, target.env, web_name, ingest.address, ingest.prefix)
        receiver = starting.submit(start_grpc, ingest, target.env, target.name)
    if web.exception() is None:
        target.web, upstream = web.result()
    if receiver.exception() is None:
        deployment.grpc, deployment.grpc_target = receiver.result()
    for started in [*workers, web, receiver]:
        started.result()  # the first failure, if any
    deployment.nginx, target.url = start_nginx(ingest, target.name, upstream.removeprefix("http://"))


# --- The load, through both receivers -------------------------------------------------------------


class GrpcLoad(stack.Load):
    """The load's clients that export with the OTLP/gRPC exporter (``url``: the receiver's host:port)."""

    def new_exporter(self):
        return GrpcSpanExporter(
            endpoint=f"http://{self.url}",
            insecure=True,
            headers=(("authorization", f"Bearer {self.key}"),),
            timeout=30,
        )


@dataclass
class Traffic:
    """One load's clients: ``http`` through nginx and gunicorn, ``grpc`` to the gRPC receiver, at once."""

    http: stack.Load
    grpc: GrpcLoad

    @classmethod
    def to(cls, deployment: Deployment, batches: dict[str, list], interval: float) -> "Traffic":
        target = deployment.stack
        return cls(
            stack.Load(target.url, target.key, batches["http"], interval),
            GrpcLoad(deployment.grpc_target, target.key, batches["grpc"], interval),
        )

    def start(self) -> "Traffic":
        self.http.start()
        self.grpc.start()
        return self

    def wait_until(self, fraction: float) -> None:
        self.http.wait_until(fraction)
        self.grpc.wait_until(fraction)

    def progress(self) -> float:
        return min(self.http.progress(), self.grpc.progress())

    def acknowledged(self) -> int:
        with self.http.lock, self.grpc.lock:
            return len(self.http.acked) + len(self.grpc.acked)

    def join(self) -> None:
        self.http.join()
        self.grpc.join()

    def total(self) -> types.SimpleNamespace:
        """Both receivers' clients as one load, as stack.tally reads one."""
        loads = (self.http, self.grpc)
        return types.SimpleNamespace(
            acked=self.http.acked | self.grpc.acked,
            sent=self.http.sent | self.grpc.sent,
            exports=sum(load.exports for load in loads),
            failed_exports=sum(load.failed_exports for load in loads),
        )

    def answers(self) -> str:
        return ", ".join(f"{count} x {status}" for status, count in sorted(self.http.answers.items()))


def spans_of(batches: dict[str, list]) -> int:
    return sum(len(export) for client in [*batches["http"], *batches["grpc"]] for export in client)


# --- What each run became ------------------------------------------------------------------------


RUNS = """
SELECT r.id, r.key, r.agent_name, r.call_count, r.turn_count, r.analysed_seq, r.uncached, r.cache_write,
       r.cache_read, r.output, r.prompt_total, r.accounting::text
FROM ingest_run r
"""
CALLS = """
SELECT run_id, seq, turn, trace_id, span_id, agent_name, analysis FROM ingest_call ORDER BY run_id, seq
"""
FINDINGS = """
SELECT run_id, coalesce(call_seq, 0), type, severity, cause, item_id, evidence::text FROM ingest_finding
ORDER BY 1, 2, 3, 4, 5, 6, 7
"""


def outcome(target: stack.Stack) -> dict[str, dict]:
    """Per run (by key): its sums, its calls in the order of their numbers (number, turn, span, agent and
    the call's analysis: buckets, cache breaks and their causes, conflicts, findings), its findings."""
    runs = {row[0]: {"run": row[1:], "calls": [], "findings": []} for row in target.query(RUNS)}
    for run_id, *call in target.query(CALLS):
        call[-1] = unpack_json(call[-1]) if call[-1] is not None else None
        runs[run_id]["calls"].append(tuple(call))
    for run_id, *finding in target.query(FINDINGS):
        runs[run_id]["findings"].append(tuple(finding))
    return {run["run"][0]: run for run in runs.values()}


def differences(multihost: dict[str, dict], single: dict[str, dict], limit: int = 5) -> list[str]:
    """Where two outcomes differ (runs missing on either side, a run's sums, a call, a finding)."""
    found = [f"run {key} only in the multi-host database" for key in sorted(multihost.keys() - single.keys())]
    found += [f"run {key} only in the single-host one" for key in sorted(single.keys() - multihost.keys())]
    for key in sorted(multihost.keys() & single.keys()):
        ours, theirs = multihost[key], single[key]
        if ours["run"] != theirs["run"]:
            found.append(f"run {key}: {ours['run']} != {theirs['run']}")
        for part in ("calls", "findings"):
            if len(ours[part]) != len(theirs[part]):
                found.append(f"run {key}: {len(ours[part])} {part} != {len(theirs[part])}")
            for mine, other in zip(ours[part], theirs[part], strict=False):
                if mine != other:
                    found.append(f"run {key}: {part[:-1]} {mine[0]}: {first_difference(mine, other)}")
                    break
    return found[:limit]


def first_difference(mine, other, path: str = "") -> str:
    """Where two values first differ (a path of indexes and keys), and the two values there."""
    if isinstance(mine, tuple | list) and isinstance(other, tuple | list) and len(mine) == len(other):
        index = next(index for index, pair in enumerate(zip(mine, other, strict=True)) if pair[0] != pair[1])
        return first_difference(mine[index], other[index], f"{path}[{index}]")
    if isinstance(mine, dict) and isinstance(other, dict) and mine.keys() == other.keys():
        name = next(name for name in mine if mine[name] != other[name])
        return first_difference(mine[name], other[name], f"{path}.{name}")
    return f"{path or 'value'}: {str(mine)[:200]} (multi-host) != {str(other)[:200]} (single host)"


BLOCKED = """
SELECT count(*) FROM pg_stat_activity waiting WHERE waiting.application_name = %s AND EXISTS (
    SELECT 1 FROM pg_stat_activity holding
    WHERE holding.application_name = %s AND holding.pid = ANY(pg_blocking_pids(waiting.pid))
)
"""


def blocked(target: stack.Stack, waiting: stack.Worker, holding: stack.Worker) -> bool:
    """Whether a session of ``waiting`` waits for a lock that a session of ``holding`` holds."""
    return target.query(BLOCKED, (waiting.name, holding.name))[0][0] > 0


SPAN_INSERTS_IN_FLIGHT = """
SELECT 1 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
WHERE a.application_name = %s AND l.relation = 'ingest_span'::regclass AND l.mode = 'RowExclusiveLock'
"""


def in_flight(target: stack.Stack, worker: stack.Worker) -> bool:
    """Whether ``worker`` is inside a batch's transaction, its spans inserted but not committed."""
    return bool(target.query(SPAN_INSERTS_IN_FLIGHT, (worker.name,)))
