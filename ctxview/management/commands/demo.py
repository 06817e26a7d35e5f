"""Run ctxview embedded with demo data: a demo user and project, the server, and sample runs sent
through the real OTLP path."""

import subprocess
import sys
import time
import urllib.request

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ctxview import demo
from ctxview.models import Probe
from ingest.keys import create_key
from ingest.models import Membership, Project, Run

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"
DEMO_PROJECT = "demo"


class Command(BaseCommand):
    help = "Start ctxview on 127.0.0.1 with a demo user, project and three demo runs (or send them to --url)."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--url", help="send the demo runs to this ctxview instead of starting one")
        parser.add_argument("--key", help="ingest key for --url")

    def handle(self, *args, port: int, url: str | None, key: str | None, **options):
        if url:
            if not key:
                raise CommandError("--url needs --key (an ingest key of the target project)")
            self._send(url, key)
            return
        key = self._demo_project_key()
        # Runs already in the demo project are not sent again (their spans would get new ids).
        skip = set(Run.objects.filter(project__slug=DEMO_PROJECT).values_list("key", flat=True))
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
        )
        try:
            self._wait_until_up(url, server)
            self._send(url, key, skip)
            self._add_probes()
            self._print_welcome(url, key)
            server.wait()
        except KeyboardInterrupt:
            pass
        finally:
            server.terminate()
            server.wait(timeout=10)

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
            return create_key(project, name="demo", user=user)

    def _wait_until_up(self, url: str, server: subprocess.Popen) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if server.poll() is not None:
                raise CommandError(
                    f"the server exited with code {server.returncode}; is {url} already in use?"
                )
            try:
                with urllib.request.urlopen(f"{url}/login/", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise CommandError("the server did not start within 60 s")

    def _send(self, url: str, key: str, skip: set[str] = frozenset()) -> None:
        for run_id, calls in demo.send(url, key, skip).items():
            self.stdout.write(f"sent the demo run {run_id}: {calls} calls")

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

    def _print_welcome(self, url: str, key: str) -> None:
        database = settings.DATABASES["default"]["NAME"]
        self.stdout.write(
            "\n"
            f"ctxview is running at {url}/\n"
            f"  log in as {DEMO_USER} / {DEMO_PASSWORD}\n"
            f"  data: {database}\n"
            f"  ingest key of the demo project: {key}\n"
            "\n"
            "Point an OpenTelemetry exporter at it with:\n"
            f"  export OTEL_EXPORTER_OTLP_ENDPOINT={url}\n"
            f'  export OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer {key}"\n'
            "\n"
            "Ctrl-C stops the server.\n"
        )
