"""Slow clients (slowloris): 32 connections that trickle a POST /login/ body, one byte a second. Straight
to gunicorn they hold every thread and the login page stops answering; through the repo's nginx
(deploy/nginx), with gunicorn from deploy/gunicorn.conf.py, it answers at once. (An OTLP export with a
key that is not valid no longer holds a thread: the receiver answers 401 before it reads the body.)

Real processes on loopback: Debian's nginx (.ci/run installs it) and gunicorn serving ctxview.
"""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from tests import services

pytestmark = pytest.mark.timing  # asserts how long things take: make test runs it alone

# One worker of four threads: four requests at a time. (With two, one worker's loop may accept nearly all
# the slow connections while the other stays free; gthread accepts up to worker_connections whatever its
# threads are doing, so how they split is up to the scheduler, and CI twice saw the login page answer.)
WORKERS, SLOW_CLIENTS = 1, 32
# What counts as quick and as blocked is derived from the login page's time on this machine, measured
# quiet before the slow clients start (a loaded machine is slower in both, not only under the attack):
# quick is within QUICK_FACTOR times the slowest quiet answer (and at least MIN_QUICK seconds), blocked is
# no answer within PATIENCE_FACTOR times that.
QUIET_SAMPLES, QUICK_FACTOR, MIN_QUICK, PATIENCE_FACTOR = 5, 4.0, 1.0, 5.0


def start_gunicorn(tmp: Path) -> tuple[services.Process, int]:
    port = services.free_port()
    env = os.environ | {
        "CTXVIEW_DATA_DIR": str(tmp / "data"),  # the login page needs no table: a fresh SQLite is enough
        "DATABASE_URL": f"sqlite:///{tmp / 'data' / 'db.sqlite3'}",
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": str(WORKERS),
    }
    env.pop("GUNICORN_CMD_ARGS", None)
    (tmp / "data").mkdir()
    args = [sys.executable, "-m", "gunicorn", "ctxview.wsgi:application", "-c", "deploy/gunicorn.conf.py"]
    process = services.Process("slow-clients-gunicorn", args, env)
    wait_answers(process, f"http://127.0.0.1:{port}")
    return process, port


def start_nginx(tmp: Path, upstream_port: int) -> tuple[services.Process, int]:
    """nginx with the repo's server config, filled in as the official image does (envsubst of the two
    variables), inside a minimal main config of our own (pid, logs and temp files in ``tmp``)."""
    port = services.free_port()
    config = services.nginx_config(
        tmp, f"127.0.0.1:{upstream_port}", f"127.0.0.1:{port}", f"{tmp}/nginx-error.log"
    )
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    checked = subprocess.run([nginx, "-t", "-c", str(config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    process = services.Process("slow-clients-nginx", [nginx, "-c", str(config)], dict(os.environ))
    wait_answers(process, f"http://127.0.0.1:{port}")
    return process, port


def wait_answers(process: services.Process, url: str) -> None:
    def answers():
        assert process.alive(), process.log()
        try:
            return requests.get(f"{url}/login/", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    services.wait_for(answers, 60, f"{url}/login/ to answer")


class SlowClients:
    """Connections that send their headers, then their body one byte a second, and never finish."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.stop = port, threading.Event()
        self.sockets: list[socket.socket] = []
        self.trickling = threading.Semaphore(0)  # released by each client once it has sent two body bytes
        self.threads = [threading.Thread(target=self._trickle, daemon=True) for _ in range(count)]

    def _trickle(self) -> None:
        # Each holds a login form: Django reads the whole body before the view answers. (Half of them sent
        # OTLP exports with a made-up key once; those are refused before their body is read, so they held
        # no thread, and the 16 left sometimes left one of the eight free.)
        path, kind = ("/login/", "application/x-www-form-urlencoded")
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        self.sockets.append(sock)
        try:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\n"
                f"Authorization: Bearer cvk_slow\r\nContent-Length: 100000\r\n\r\n".encode()
            )
            sent = 0
            while not self.stop.wait(1.0):
                sock.sendall(b"a")
                sent += 1
                if sent == 2:  # two seconds in, as the fixed wait this replaces
                    self.trickling.release()
        except OSError:
            pass  # closed by the server (nginx's client_body_timeout does not fire at a byte a second)

    def __enter__(self) -> "SlowClients":
        for thread in self.threads:
            thread.start()
        # Every connection open, its headers read by the server and the body trickling: holding a thread
        # (or nginx's attention). Waited for, not slept: a loaded machine takes longer to open 32.
        for _ in self.threads:
            assert self.trickling.acquire(timeout=60), "a slow client could not connect and send"
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for sock in self.sockets:
            sock.close()


def stalled_headers_dropped_after(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"GET /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        started = time.perf_counter()
        while sock.recv(4096):  # nginx may answer 408 before it closes
            pass
        return time.perf_counter() - started


def login_page_seconds(port: int, patience: float) -> float | None:
    """Seconds until GET /login/ answered 200, or None when it did not within ``patience``."""
    started = time.perf_counter()
    try:
        response = requests.get(f"http://127.0.0.1:{port}/login/", timeout=patience)
    except requests.Timeout:
        return None
    assert response.status_code == 200
    return time.perf_counter() - started


def test_slow_clients_hold_gunicorn_but_not_nginx_in_front_of_it(tmp_path):
    if shutil.which("nginx") is None and not Path("/usr/sbin/nginx").exists():
        services.require("nginx (apt-get install nginx; .ci/run does)")
    gunicorn, gunicorn_port = start_gunicorn(tmp_path)
    nginx = None
    try:
        nginx, nginx_port = start_nginx(tmp_path, gunicorn_port)
        quiet = [login_page_seconds(port, 60) for port in (nginx_port, gunicorn_port) * QUIET_SAMPLES]
        quick = max(MIN_QUICK, QUICK_FACTOR * max(quiet))
        patience = PATIENCE_FACTOR * quick
        with SlowClients(gunicorn_port, SLOW_CLIENTS):
            direct = login_page_seconds(gunicorn_port, patience)
        with SlowClients(nginx_port, SLOW_CLIENTS):
            proxied = [login_page_seconds(nginx_port, patience) for _ in range(5)]
            # Gunicorn behind it is idle: nginx has not passed a single incomplete request on.
            also_direct = login_page_seconds(gunicorn_port, patience)
        straight = f"did not answer in {patience:.1f} s" if direct is None else f"answered in {direct:.2f} s"
        print(
            f"{SLOW_CLIENTS} slow clients, gunicorn {WORKERS}x4 threads: straight to gunicorn the login page "
            f"{straight}; through nginx {max(proxied) * 1000:.0f} ms at most (quiet: "
            f"{max(quiet) * 1000:.0f} ms at most, so quick means under {quick:.1f} s)"
        )
        assert direct is None, "the slow clients did not hold gunicorn: this test no longer shows the attack"
        assert all(seconds is not None and seconds < quick for seconds in proxied), proxied
        assert also_direct is not None
        # And a client that stops sending its headers is dropped (client_header_timeout 10s), give or take
        # the machine's measured slowness.
        dropped = stalled_headers_dropped_after(nginx_port)
        print(f"a client that stalls in its headers is dropped by nginx after {dropped:.1f} s")
        assert 9 <= dropped <= 10 + max(5.0, quick)
    finally:
        if nginx is not None:
            nginx.stop()
        gunicorn.stop()
