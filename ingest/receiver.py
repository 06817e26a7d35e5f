"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs.

Validate, store the raw batch, enqueue its processing on commit, answer. The 200 is sent only after
the batch is committed; everything after that can fail and be retried from the stored batch.
"""

import logging
import zlib
from functools import partial

from django.conf import settings
from django.db import DatabaseError, transaction
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from ingest import budget, otlp, ratelimit
from ingest.keys import key_from_request, key_id, project_for_key
from ingest.models import RawBatch
from ingest.redact import mask_request
from ingest.tasks import enqueue_batch

logger = logging.getLogger(__name__)

_MEDIA_TYPE = {otlp.PROTOBUF: "application/x-protobuf", otlp.JSON: "application/json"}
_READ_SIZE = 64 * 1024

# Bytes of request bodies (as read, and decompressed) this process holds at once.
INFLIGHT = budget.Budget(lambda: settings.CTXVIEW_INGEST_MAX_INFLIGHT_BYTES)


@csrf_exempt
def receive_traces(request: HttpRequest) -> HttpResponse:
    with INFLIGHT.hold() as hold:
        return _receive(request, otlp.TRACES, hold)


@csrf_exempt
def receive_logs(request: HttpRequest) -> HttpResponse:
    with INFLIGHT.hold() as hold:
        return _receive(request, otlp.LOGS, hold)


def _receive(request: HttpRequest, signal: str, hold: budget.Hold) -> HttpResponse:
    # Errors are answered in the request's encoding when it is one we know, else in JSON.
    try:
        fmt = otlp.body_format(request.headers.get("Content-Type", ""))
    except otlp.UnsupportedMediaType:
        fmt = None
    reply_fmt = fmt or otlp.JSON

    if request.method != "POST":
        response = _status(405, f"{request.method} is not allowed here: OTLP exports are POSTed", reply_fmt)
        response["Allow"] = "POST"
        return response
    key = key_from_request(request)
    if key is None:
        return _status(401, "missing ingest key: send 'Authorization: Bearer <key>'", reply_fmt)
    try:
        project = project_for_key(key)
    except DatabaseError as exc:
        # The database is away (a restart, a failover): a retryable answer, so nothing sent is lost.
        logger.warning("could not check an ingest key: %s", exc)
        return _unavailable("ctxview cannot reach its database right now; retry later", reply_fmt)
    if project is None:
        return _status(401, "invalid or revoked ingest key", reply_fmt)
    if not ratelimit.allow(key_id(key)):
        return _unavailable("too many requests for this ingest key; retry later", reply_fmt, retry_after=1)
    try:
        fmt = otlp.body_format(request.headers.get("Content-Type", ""))
        body = _read_body(request, hold)
        data = otlp.decompress(
            body,
            request.headers.get("Content-Encoding", ""),
            settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES,
            grow=hold.grow,
        )
        decoded = otlp.validate(signal, otlp.parse_request(signal, data, fmt))
    except otlp.OtlpError as exc:
        return _status(exc.status, exc.message, reply_fmt)
    except budget.OverBudget:
        return _unavailable("ctxview has too many large requests in hand; retry later", reply_fmt)

    if decoded.accepted:
        redacted = _mask_secrets(project, decoded, data, fmt)
        # A protobuf body with nothing removed or masked is stored as sent; otherwise re-encode it.
        unchanged = fmt == otlp.PROTOBUF and not decoded.rejected and not redacted
        stored = data if unchanged else decoded.message.SerializeToString()
        try:
            if _backlog_is_full():
                return _unavailable("ctxview is behind on processing; retry later", reply_fmt)
            with transaction.atomic():
                batch = RawBatch.objects.create(
                    project=project,
                    signal=signal,
                    body=zlib.compress(stored, 1),
                    content_type=fmt,
                    wire_bytes=len(body),
                    item_count=decoded.accepted,
                    rejected_count=decoded.rejected,
                    redacted=redacted,
                )
                transaction.on_commit(partial(enqueue_batch, batch.id), robust=True)
        except DatabaseError as exc:
            logger.warning("could not store a %s batch for %s: %s", signal, project.slug, exc)
            return _unavailable("ctxview cannot store data right now; retry later", reply_fmt)
    return HttpResponse(otlp.export_response(signal, decoded, fmt), content_type=_MEDIA_TYPE[fmt])


def _mask_secrets(project, decoded: otlp.Decoded, data: bytes, fmt: str) -> int:
    """Mask the project's redaction patterns in every string, before anything is stored."""
    redactor = project.redactor()
    if redactor.combined is None:
        return 0
    # Protobuf embeds strings as UTF-8: when the raw bytes hold no match, no string does.
    if fmt == otlp.PROTOBUF and not redactor.might_match(data):
        return 0
    return mask_request(decoded.message, redactor)


def _read_body(request: HttpRequest, hold: budget.Hold) -> bytes:
    """The body as sent, at most CTXVIEW_INGEST_MAX_BODY_BYTES, held in ``hold``."""
    limit = settings.CTXVIEW_INGEST_MAX_BODY_BYTES
    if not request.META.get("CONTENT_LENGTH"):
        return _read_unsized_body(request, limit, hold)
    try:
        declared = int(request.META["CONTENT_LENGTH"])
    except ValueError:
        raise otlp.BadRequest("Content-Length is not a number") from None
    if declared > limit:
        raise otlp.TooLarge(f"body is {declared} bytes; the limit is {limit}")
    hold.grow(declared)
    body = request.read(limit + 1)
    if len(body) > limit:
        raise otlp.TooLarge(f"body is larger than the limit of {limit} bytes")
    return body


def _read_unsized_body(request: HttpRequest, limit: int, hold: budget.Hold) -> bytes:
    # Without Content-Length (a chunked upload) Django's request stream is empty: the body would be read
    # as an empty, valid export and acknowledged while dropped. Servers that decode such a body set
    # wsgi.input_terminated (gunicorn does); read it from wsgi.input, then. Any other server (runserver)
    # cannot give it to us: 411 tells the client to send Content-Length. With neither Content-Length
    # nor Transfer-Encoding a request has no body (RFC 9112, 6.3).
    if not request.META.get("wsgi.input_terminated"):
        if "HTTP_TRANSFER_ENCODING" not in request.META:
            return b""
        raise otlp.LengthRequired(
            "this server cannot read a body without Content-Length (chunked): send Content-Length"
        )
    stream = request.META["wsgi.input"]
    body = bytearray()
    while chunk := stream.read(min(_READ_SIZE, limit + 1 - len(body))):
        hold.grow(len(chunk))
        body += chunk
        if len(body) > limit:
            raise otlp.TooLarge(f"body is larger than the limit of {limit} bytes")
    return bytes(body)


def _backlog_is_full() -> bool:
    limit = settings.CTXVIEW_INGEST_MAX_PENDING_BATCHES
    return bool(limit) and RawBatch.objects.filter(status=RawBatch.Status.PENDING).count() >= limit


def _status(http_status: int, message: str, fmt: str) -> HttpResponse:
    return HttpResponse(
        otlp.status_body(http_status, message, fmt), status=http_status, content_type=_MEDIA_TYPE[fmt]
    )


def _unavailable(message: str, fmt: str, retry_after: int | None = None) -> HttpResponse:
    # 503 + Retry-After: released Python exporters retry 503 but not 429.
    response = _status(503, message, fmt)
    response["Retry-After"] = str(retry_after or settings.CTXVIEW_INGEST_RETRY_AFTER_SECONDS)
    return response
