"""Serve OTLP over gRPC (traces and logs) until SIGTERM or Ctrl-C."""

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ingest import grpc_receiver
from ingest.malloc import return_large_blocks

# In-flight requests get this long to finish (and commit) after SIGTERM; new ones are refused.
GRACE_SECONDS = 10


class Command(BaseCommand):
    help = "Serve OTLP/gRPC (TraceService and LogsService Export, and grpc.health.v1) for agents."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", help=f"host:port to listen on (default CTXVIEW_GRPC_BIND, {settings.CTXVIEW_GRPC_BIND})"
        )
        parser.add_argument(
            "--threads", type=int, help="requests handled at once (default CTXVIEW_GRPC_THREADS)"
        )

    def handle(self, *args, bind: str | None, threads: int | None, **options):
        return_large_blocks()  # before the server's threads start
        bind = bind or settings.CTXVIEW_GRPC_BIND
        threads = threads or settings.CTXVIEW_GRPC_THREADS
        try:
            server = grpc_receiver.start(bind, threads)
        except OSError as exc:
            raise CommandError(str(exc)) from None
        stop = threading.Event()
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda *_: stop.set())
        host = bind.rsplit(":", 1)[0]
        self.stdout.write(
            f"serving OTLP/gRPC on {host}:{server.port} ({'TLS' if server.tls else 'plaintext'}, "
            f"{threads} threads): {grpc_receiver.TRACE_SERVICE}, {grpc_receiver.LOGS_SERVICE}"
        )
        self.stdout.flush()
        while not stop.wait(1):
            pass
        self.stdout.write("stopping: finishing the requests in flight")
        self.stdout.flush()  # said now, not when the process ends: finishing may take the grace period
        server.stop(GRACE_SECONDS)
