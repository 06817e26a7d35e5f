"""Run ctxview embedded with demo data: a demo user and project, the server, and sample runs sent
through the real OTLP path."""

import errno
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ctxview import demo
from ctxview.demo import cli
from ctxview.models import Probe
from ctxview.monitors import engine
from ingest.keys import create_key
from ingest.models import IngestKey, Membership, Project, Run

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"
DEMO_PROJECT = "demo"


_OTHER_PORT = "start the demo on another port: make demo PORT=8001 (or python manage.py demo --port 8001)"


def _require_free_port(port: int) -> None:
    """A clear way out when the port is taken, before anything is created or started."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(f"port {port} is in use (another ctxview?): {_OTHER_PORT}") from None
            raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None


class Command(BaseCommand):
    help = "Start ctxview on 127.0.0.1 with a demo user, project and four demo runs (or send them to --url)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--grpc-port", type=int, default=4317, help="OTLP/gRPC port (another free one when it is taken)"
        )
        parser.add_argument("--url", help="send the demo runs to this ctxview instead of starting one")
        parser.add_argument("--key", help="ingest key for --url")

    def handle(self, *args, port: int, grpc_port: int, url: str | None, key: str | None, **options):
        if url:
            if not key:
                raise CommandError("--url needs --key (an ingest key of the target project)")
            self._send(url, key)
            return
        _require_free_port(port)
        # Ctrl-C, and a service manager's SIGTERM, stop both servers: even where the demo was started with
        # SIGINT ignored (a background job of a shell does; Python then installs no handler of its own).
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, _interrupt)
        key = self._demo_project_key()
        # Runs already in the demo project are not sent again (their spans would get new ids).
        skip = set(Run.objects.filter(project__slug=DEMO_PROJECT).values_list("key", flat=True))
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
        )
        taken = not _port_is_free(grpc_port)
        grpc_target = f"127.0.0.1:{_free_port() if taken else grpc_port}"
        grpc_server = subprocess.Popen(
            [sys.executable, "manage.py", "serve_otlp_grpc", "--bind", grpc_target, "--threads", "4"]
        )
        stop_ticking = threading.Event()
        try:
            self._wait_until_up(url, server)
            self._wait_until_listening(grpc_target, grpc_server)
            self._send(url, key, skip)
            self._add_probes()
            if taken:
                self.stdout.write(f"port {grpc_port} is taken: OTLP/gRPC listens on {grpc_target} instead")
            self._print_welcome(url, grpc_target, key)
            # Embedded, nothing runs Celery beat: this process ticks the monitors every minute (a thread
            # here rather than a tick after each analysis: a monitor also resolves when nothing arrives).
            ticking = threading.Thread(target=engine.ticker, args=(60, stop_ticking), daemon=True)
            ticking.start()
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            stop_ticking.set()
            for process in (server, grpc_server):
                process.terminate()
            for process in (server, grpc_server):
                process.wait(timeout=15)

    def _demo_project_key(self) -> str:
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=DEMO_USER)
            if created:
                user.set_password(DEMO_PASSWORD)
                user.save()
            project, _ = Project.objects.get_or_create(slug=DEMO_PROJECT, defaults={"name": "Demo"})
            Membership.objects.update_or_create(
                project=project, user=user, defaults={"role": Membership.Role.ADMIN}
            )
            # Only the hash of a key is kept, so the last one cannot be shown again: replace it, so that
            # running the demo again does not leave another active key behind.
            for old_key in IngestKey.objects.filter(project=project, name="demo", revoked_at__isnull=True):
                old_key.revoke()
            return create_key(project, name="demo", user=user)

    def _wait_until_up(self, url: str, server: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise CommandError(
                    f"the server exited with code {server.returncode}; if {url} is already in use, "
                    f"{_OTHER_PORT}"
                )
            try:
                with urllib.request.urlopen(f"{url}/login/", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise CommandError("the server did not start within 60 s")

    def _wait_until_listening(self, target: str, server: subprocess.Popen) -> None:
        host, port = target.rsplit(":", 1)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise CommandError(f"the OTLP/gRPC receiver exited with code {server.returncode}")
            try:
                socket.create_connection((host, int(port)), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise CommandError("the OTLP/gRPC receiver did not start within 60 s")

    def _send(self, url: str, key: str, skip: set[str] = frozenset()) -> None:
        for run_id, calls in demo.send(url, key, skip).items():
            self.stdout.write(f"sent the demo run {run_id}: {calls} calls")
        for session, exports in cli.send(url, key, skip).items():
            self.stdout.write(f"sent the coding CLI recording {session}: {exports} OTLP exports")

    def _add_probes(self, wait_s: float = 30) -> None:
        """The texts each story follows through its replay (besides its facts and rules), once its run
        is stored (the server stores a batch after answering it)."""
        deadline = time.monotonic() + wait_s
        for story in demo.STORIES:
            texts = getattr(story, "PROBE_TEXTS", ())
            run = None
            while texts and run is None and time.monotonic() < deadline:
                run = Run.objects.filter(project__slug=DEMO_PROJECT, key=story.RUN_ID).first()
                if run is None:
                    time.sleep(0.5)
            for text in texts if run is not None else ():
                Probe.objects.get_or_create(
                    run=run, kind="text", value=text, defaults={"project": run.project}
                )

    def _print_welcome(self, url: str, grpc_target: str, key: str) -> None:
        database = settings.DATABASES["default"]["NAME"]
        self.stdout.write(
            "\n"
            f"ctxview is running at {url}/\n"
            f"  log in as {DEMO_USER} / {DEMO_PASSWORD}\n"
            f"  data: {database}\n"
            f"  ingest key of the demo project: {key}\n"
            "\n"
            "Point an OpenTelemetry exporter at it, over OTLP/HTTP:\n"
            "  export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf\n"
            f"  export OTEL_EXPORTER_OTLP_ENDPOINT={url}\n"
            f'  export OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {key}"\n'
            "or over OTLP/gRPC:\n"
            "  export OTEL_EXPORTER_OTLP_PROTOCOL=grpc\n"
            f"  export OTEL_EXPORTER_OTLP_ENDPOINT=http://{grpc_target}\n"
            f'  export OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {key}"\n'
            "\n"
            "Ctrl-C stops the servers.\n"
        )


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _interrupt(signum, frame):
    raise KeyboardInterrupt
