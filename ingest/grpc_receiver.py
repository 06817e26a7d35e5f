"""OTLP/gRPC receiver: TraceService/Export and LogsService/Export, and grpc.health.v1.

Served by ``python manage.py serve_otlp_grpc``. Every request goes through ingest.accept, the path the
OTLP/HTTP receiver takes: OK is answered only once the raw batch is committed, and every refusal maps to
the status code the OTLP specification gives it, so exporters retry exactly what they should.
"""

import collections
import logging
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
MISSING_KEY = (
    "missing ingest key: send the metadata 'authorization: Bearer <key>' (or 'x-ctxview-key: <key>')"
)


class _Status(collections.namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    pass


def _abort(context: grpc.ServicerContext, error: otlp.OtlpError) -> None:
    """End the call with the status for ``error``: a google.rpc.Status with BadRequest or RetryInfo."""
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
    context.abort_with_status(_Status(rich.code, rich.details, rich.trailing_metadata + trailers))


def _export(signal: str):
    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        # A thread of the pool lives for the whole server: drop a connection that has outlived
        # CONN_MAX_AGE or broke, as Django does around every HTTP request.
        close_old_connections()
        try:
            return _receive(signal, request, context)
        finally:
            close_old_connections()

    return export


def _receive(signal: str, data: bytes, context: grpc.ServicerContext) -> bytes:
    key = key_from_metadata(context.invocation_metadata())
    if key is None:
        _abort(context, accept.Unauthenticated(MISSING_KEY))
    try:
        project = accept.authorise(key)
        # grpcio has already undone the message's compression, within max_receive_message_length; the
        # message still counts against this process's bytes in flight, shared with OTLP/HTTP.
        with accept.INFLIGHT.hold(len(data)):
            return accept.accept(project, signal, data, otlp.PROTOBUF, wire_bytes=len(data))
    except budget.OverBudget:
        _abort(context, accept.Unavailable("ctxview has too many large requests in hand; retry later"))
        raise  # not reached: abort_with_status raises
    except otlp.OtlpError as exc:
        _abort(context, exc)
        raise  # not reached: abort_with_status raises


def _service(name: str, signal: str) -> grpc.GenericRpcHandler:
    # No request deserializer: the handler gets the bytes and ingest.otlp parses them, so a malformed
    # request is INVALID_ARGUMENT with a message (grpcio's own deserialising would answer INTERNAL), and
    # a request with nothing to mask is stored as received.
    handler = grpc.unary_unary_rpc_method_handler(_export(signal))
    return grpc.method_handlers_generic_handler(name, {"Export": handler})


@dataclass
class Server:
    server: grpc.Server
    health: health.HealthServicer
    port: int
    tls: bool

    def stop(self, grace: float) -> None:
        """Stop taking requests, report NOT_SERVING, and let the ones in flight finish within ``grace``."""
        self.health.enter_graceful_shutdown()
        self.server.stop(grace).wait()


def start(bind: str, threads: int) -> Server:
    """Start the receiver on ``bind`` (host:port; port 0 picks a free one), TLS when configured."""
    limit = settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES
    server = grpc.server(
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="otlp-grpc"),
        handlers=[_service(TRACE_SERVICE, otlp.TRACES), _service(LOGS_SERVICE, otlp.LOGS)],
        options=[
            # Checked by grpcio on the message once decompressed: larger is RESOURCE_EXHAUSTED.
            ("grpc.max_receive_message_length", limit),
            # grpcio sets SO_REUSEPORT by default: a second server on a busy port would share it silently.
            ("grpc.so_reuseport", 0),
        ],
    )
    checker = health.HealthServicer()
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
    server.start()
    for service in ("", TRACE_SERVICE, LOGS_SERVICE):
        checker.set(service, health_pb2.HealthCheckResponse.SERVING)
    return Server(server, checker, port, tls)
