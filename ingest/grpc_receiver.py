"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export, and grpc.health.v1.

Served by ``python manage.py serve_otlp_grpc``. Every request goes through ingest.accept, the path the
OTLP/HTTP receiver takes: OK is answered only once the raw batch is committed, and every refusal maps to
the status code the OTLP specification gives it, so exporters retry exactly what they should.
"""

import asyncio
import collections
import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc
from django.conf import settings
from django.db import close_old_connections
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest import accept, budget, otlp
from ingest.keys import key_from_metadata

logger = logging.getLogger(__name__)

TRACE_SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
LOGS_SERVICE = logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name

# From the HTTP status each refusal carries. OTLP/gRPC: INVALID_ARGUMENT and UNAUTHENTICATED are final;
# RESOURCE_EXHAUSTED without RetryInfo is final (the message is too large); UNAVAILABLE is retried.
_CODE = {
    400: grpc.StatusCode.INVALID_ARGUMENT,
    401: grpc.StatusCode.UNAUTHENTICATED,
    413: grpc.StatusCode.RESOURCE_EXHAUSTED,
    415: grpc.StatusCode.INVALID_ARGUMENT,
    503: grpc.StatusCode.UNAVAILABLE,
}
# opentelemetry-exporter-otlp-proto-grpc reads the retry delay from this trailer, not from the
# google.rpc.Status details that the Collector's exporters read: send it both ways.
RETRY_INFO_TRAILER = "google.rpc.retryinfo-bin"
MAX_STREAMS_PER_CONNECTION = 100
MISSING_KEY = (
    "missing ingest key: send the metadata 'authorization: Bearer <key>' (or 'x-ctxview-key: <key>')"
)


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    pass


def _status_for(error: otlp.OtlpError) -> _Status:
    """The status ending a call refused with ``error``: a google.rpc.Status with BadRequest or RetryInfo."""
    code = _CODE.get(error.status, grpc.StatusCode.INVALID_ARGUMENT)
    status = status_pb2.Status(code=code.value[0], message=error.message)
    trailers: tuple = ()
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        detail = error_details_pb2.BadRequest()
        detail.field_violations.add(field="request", description=error.message)
        status.details.add().Pack(detail)
    elif isinstance(error, accept.Unavailable):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.seconds = error.retry_after
        status.details.add().Pack(retry)
        trailers = ((RETRY_INFO_TRAILER, retry.SerializeToString()),)
    rich = rpc_status.to_status(status)
    return _Status(rich.code, rich.details, rich.trailing_metadata + trailers)


class _Turns:
    """At most ``per_connection`` calls of one connection in the pool at once, running or queued.

    The pool serves calls in the order they come: a client with 300 calls in hand would otherwise queue
    them all before another client's one (0.6 s behind 300 refused calls on 2 cores, growing with the
    count). A connection shared by many clients (a Collector in front) shares its turns too."""

    def __init__(self, per_connection: int) -> None:
        self.per_connection = per_connection
        self._slots: dict[str, list] = {}  # peer -> [semaphore, calls waiting or in the pool]

    @contextlib.asynccontextmanager
    async def of(self, peer: str):
        # Only the event loop's thread gets here: no lock needed.
        slot = self._slots.setdefault(peer, [asyncio.Semaphore(self.per_connection), 0])
        slot[1] += 1
        try:
            async with slot[0]:
                yield
        finally:
            slot[1] -= 1
            if not slot[1]:
                del self._slots[peer]


def _export(signal: str, pool: ThreadPoolExecutor, turns: _Turns):
    # An asyncio handler: the call waits for its request message in the event loop, and takes a thread
    # of the pool only once the message is all here. grpcio's threaded server read the message inside a
    # pool thread, so eight clients that opened a call and never sent its message (or sent it slowly)
    # held all eight threads, and every other client's export waited until their deadline (issue 40).
    async def export(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        metadata = tuple(context.invocation_metadata() or ())
        loop = asyncio.get_running_loop()
        try:
            async with turns.of(context.peer()):
                return await loop.run_in_executor(pool, _in_thread, signal, request, metadata)
        except otlp.OtlpError as exc:
            refusal = _status_for(exc)
        await context.abort(refusal.code, refusal.details, refusal.trailing_metadata)

    return export


def _in_thread(signal: str, data: bytes, metadata: tuple) -> bytes:
    # A thread of the pool lives for the whole server: drop a connection that has outlived
    # CONN_MAX_AGE or broke, as Django does around every HTTP request.
    close_old_connections()
    try:
        return _receive(signal, data, metadata)
    finally:
        close_old_connections()


def _receive(signal: str, data: bytes, metadata: tuple) -> bytes:
    key = key_from_metadata(metadata)
    if key is None:
        raise accept.Unauthenticated(MISSING_KEY)
    project = accept.authorise(key)
    # grpcio has already undone the message's compression, within max_receive_message_length; the
    # message still counts against this process's bytes in flight, shared with OTLP/HTTP.
    try:
        with accept.INFLIGHT.hold(len(data)):
            return accept.accept(project, signal, data, otlp.PROTOBUF, wire_bytes=len(data))
    except budget.OverBudget:
        raise accept.Unavailable("ctxview has too many large requests in hand; retry later") from None


def _service(name: str, signal: str, pool: ThreadPoolExecutor, turns: _Turns) -> grpc.GenericRpcHandler:
    # No request deserializer: the handler gets the bytes and ingest.otlp parses them, so a malformed
    # request is INVALID_ARGUMENT with a message (grpcio's own deserialising would answer INTERNAL), and
    # a request with nothing to mask is stored as received.
    handler = grpc.unary_unary_rpc_method_handler(_export(signal, pool, turns))
    return grpc.method_handlers_generic_handler(name, {"Export": handler})


@dataclass
class Server:
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    port: int
    tls: bool
    loop: asyncio.AbstractEventLoop
    loop_thread: threading.Thread
    pool: ThreadPoolExecutor

    def stop(self, grace: float) -> None:
        """Stop taking requests, report NOT_SERVING, and let the ones in flight finish within ``grace``."""

        async def stop() -> None:
            await self.health.enter_graceful_shutdown()
            await self.server.stop(grace)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.loop_thread.join()
        self.pool.shutdown()


def start(bind: str, threads: int) -> Server:
    """Start the receiver on ``bind`` (host:port; port 0 picks a free one), TLS when configured.

    The server's event loop runs in a thread of its own; ``threads`` threads handle the requests."""
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="otlp-grpc")
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, name="otlp-grpc-loop", daemon=True)
    loop_thread.start()
    try:
        started = asyncio.run_coroutine_threadsafe(_start(bind, pool, threads), loop)
        server, checker, port, tls = started.result()
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join()
        pool.shutdown()
        raise
    return Server(server, checker, port, tls, loop, loop_thread, pool)


async def _start(bind: str, pool: ThreadPoolExecutor, threads: int):
    limit = settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES
    turns = _Turns(max(1, threads // 2))  # another connection always finds a thread soon
    server = grpc.aio.server(
        handlers=[
            _service(TRACE_SERVICE, otlp.TRACES, pool, turns),
            _service(LOGS_SERVICE, otlp.LOGS, pool, turns),
        ],
        options=[
            # Checked by grpcio on the message once decompressed: larger is RESOURCE_EXHAUSTED.
            ("grpc.max_receive_message_length", limit),
            # grpcio sets SO_REUSEPORT by default: a second server on a busy port would share it silently.
            ("grpc.so_reuseport", 0),
            # Calls one connection may hold open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): an
            # exporter sends one at a time; a client opening hundreds waits for its own to finish.
            ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
        ],
    )
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    tls = bool(settings.CTXVIEW_GRPC_TLS_CERT)
    try:
        if tls:
            # The settings hold the PEM text stripped of its last newline (ctxview.env reads files so).
            key = f"{settings.CTXVIEW_GRPC_TLS_KEY}\n".encode()
            chain = f"{settings.CTXVIEW_GRPC_TLS_CERT}\n".encode()
            credentials = grpc.ssl_server_credentials([(key, chain)])
            port = server.add_secure_port(bind, credentials)
        else:
            port = server.add_insecure_port(bind)
    except RuntimeError as exc:  # grpcio raises on a port it cannot bind (older releases returned 0)
        raise OSError(f"cannot listen on {bind}: {exc}") from None
    if not port:
        raise OSError(f"cannot listen on {bind}")
    await server.start()
    for service in ("", TRACE_SERVICE, LOGS_SERVICE):
        await checker.set(service, health_pb2.HealthCheckResponse.SERVING)
    return server, checker, port, tls
