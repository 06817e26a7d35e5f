"""Real services for tests: the PostgreSQL test database, the broker, worker and web processes."""

import os
import socket
import string
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
# The Celery worker processes this test process started (their node names): the ones it waits for.
NODES: list[str] = []


def artifact(name: str) -> Path:
    """A file of test-artifacts/, one per pytest-xdist worker where several run at once."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = Path(name)
    return ARTIFACTS / (f"{path.stem}-{worker}{path.suffix}" if worker else name)


def require(what: str) -> None:
    """Skip (loudly, with the reason) when a service is not configured; fail instead where CI requires it."""
    message = f"{what} is not configured: this test needs the real service"
    if os.environ.get("CTXVIEW_REQUIRE_SERVICES") == "1":
        pytest.fail(message)
    pytest.skip(message)


def postgres_url(settings_dict: dict) -> str:
    user = quote(settings_dict["USER"] or "")
    password = f":{quote(settings_dict['PASSWORD'])}" if settings_dict["PASSWORD"] else ""
    host = settings_dict["HOST"] or "localhost"
    port = f":{settings_dict['PORT']}" if settings_dict["PORT"] else ""
    return f"postgres://{user}{password}@{host}{port}/{quote(settings_dict['NAME'])}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def nginx_config(folder: Path, upstream: str, listen: str, error_log: str) -> Path:
    """Write into ``folder`` an nginx config as the official image makes one: deploy/nginx's server config
    with its two variables filled in (envsubst), inside a minimal main config of our own (pid and temp
    files in ``folder``, errors to ``error_log``); returns the main config's path."""
    template = (ROOT / "deploy" / "nginx" / "ctxview.conf.template").read_text()
    server = string.Template(template).safe_substitute(CTXVIEW_UPSTREAM=upstream, NGINX_PORT=listen)
    (folder / "ctxview.conf").write_text(server)
    folder.chmod(0o755)  # as root, nginx's workers run as nobody
    temp = folder / "nginx-temp"
    temp.mkdir(mode=0o777)
    temp.chmod(0o777)
    main = folder / "nginx.conf"
    main.write_text(
        f"""
daemon off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {error_log} warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {folder}/ctxview.conf;
}}
"""
    )
    return main


def wait_for(check, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Process:
    """A child process whose output goes to a log file under test-artifacts/."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]):
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = artifact(f"{name}.log")
        self._log = self.log_path.open("ab")
        self.popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if getattr(self, "node", None) in NODES:
            NODES.remove(self.node)
        if self.alive():
            self.popen.terminate()
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()


def start_worker(env: dict[str, str], name: str = "worker") -> Process:
    from ctxview.celery import app

    node = f"{name}-{os.getpid()}@localhost"
    env = {"PGAPPNAME": f"ctxview-test-{name}"} | env  # its database sessions, told apart by name
    process = Process(
        name,
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ctxview",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "-n",
            node,
        ],
        env,
    )

    def ready():
        assert process.alive(), f"worker exited:\n{process.log()}"
        return app.control.ping(destination=[node], timeout=0.5)

    wait_for(ready, 60, "the Celery worker to answer a ping")
    NODES.append(node)
    process.node = node
    return process


def workers_idle() -> bool:
    """No task queued on the broker, and none running or reserved by a worker this process started."""
    from amqp.exceptions import ChannelError

    from ctxview.celery import app

    with app.connection_for_read() as connection:
        try:
            queue = app.conf.task_default_queue
            queued = connection.default_channel.queue_declare(queue, passive=True).message_count
        except ChannelError:  # Redis: an empty queue has no key at all
            queued = 0
    if queued:
        return False
    inspect = app.control.inspect(timeout=1, destination=NODES or None)
    busy = [tasks for reply in (inspect.active(), inspect.reserved()) for tasks in (reply or {}).values()]
    return not any(busy)


def start_web(env: dict[str, str], name: str = "web", server: str = "runserver") -> tuple[Process, str]:
    """``server`` is Django's ``runserver`` or ``gunicorn`` (as deployed): they read request bodies
    differently (gunicorn decodes a chunked body, runserver cannot)."""
    port = free_port()
    if server == "gunicorn":
        args = [sys.executable, "-m", "gunicorn", "ctxview.wsgi:application", "-b", f"127.0.0.1:{port}"]
        args += ["--workers", "1", "--threads", "4", "--timeout", "120"]
    else:
        args = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    process = Process(name, args, env)
    url = f"http://127.0.0.1:{port}"

    def ready():
        assert process.alive(), f"web server exited:\n{process.log()}"
        try:
            with urllib.request.urlopen(f"{url}/login/", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    wait_for(ready, 60, "the web server to answer")
    return process, url


def start_grpc(
    env: dict[str, str],
    name: str = "grpc",
    root_certificate: bytes | None = None,
    host: str = "127.0.0.1",
    prefix: tuple[str, ...] = (),
) -> tuple[Process, int]:
    """``manage.py serve_otlp_grpc`` on a free port of ``host`` (run under ``prefix``, e.g. ``ip netns exec
    NAME``), once its health service says SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from ingest.grpc_receiver import TRACE_SERVICE

    port = free_port()
    artifact(f"{name}.log").unlink(missing_ok=True)  # the tests read what this run printed
    target = f"{host}:{port}"
    process = Process(name, [*prefix, sys.executable, "manage.py", "serve_otlp_grpc", "--bind", target], env)
    if root_certificate is None:
        channel = grpc.insecure_channel(target)
    else:
        channel = grpc.secure_channel(
            target, grpc.ssl_channel_credentials(root_certificates=root_certificate)
        )
    health = health_pb2_grpc.HealthStub(channel)

    def ready():
        assert process.alive(), f"gRPC receiver exited:\n{process.log()}"
        try:
            answer = health.Check(health_pb2.HealthCheckRequest(service=TRACE_SERVICE), timeout=1)
        except grpc.RpcError:
            return False
        return answer.status == health_pb2.HealthCheckResponse.SERVING

    try:
        wait_for(ready, 60, "the gRPC receiver to report SERVING", interval=0.2)
    finally:
        channel.close()
    return process, port
