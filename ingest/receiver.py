"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs.

Read and decompress the body, then hand it to ingest.accept, the path both receivers share: validate,
store the raw batch, enqueue its processing on commit. The 200 is sent only after the batch is
committed; everything after that can fail and be retried from the stored batch.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from ingest import accept, budget, otlp
from ingest.keys import key_from_request

_MEDIA_TYPE = {otlp.PROTOBUF: "application/x-protobuf", otlp.JSON: "application/json"}
_READ_SIZE = 64 * 1024


@csrf_exempt
def receive_traces(request: HttpRequest) -> HttpResponse:
    with accept.INFLIGHT.hold() as hold:
        return _receive(request, otlp.TRACES, hold)


@csrf_exempt
def receive_logs(request: HttpRequest) -> HttpResponse:
    with accept.INFLIGHT.hold() as hold:
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
        project = accept.authorise(key)
        fmt = otlp.body_format(request.headers.get("Content-Type", ""))
        body = _read_body(request, hold)
        encoding = request.headers.get("Content-Encoding", "")
        data = otlp.decompress(body, encoding, settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES, grow=hold.grow)
        gzipped = body if encoding.strip().lower() == "gzip" else None
        answer = accept.accept(project, signal, data, fmt, wire_bytes=len(body), gzipped=gzipped)
    except accept.Unavailable as exc:
        return _unavailable(exc.message, reply_fmt, exc.retry_after)
    except otlp.OtlpError as exc:
        return _status(exc.status, exc.message, reply_fmt)
    except budget.OverBudget:
        busy = accept.Unavailable("ctxview has too many large requests in hand; retry later")
        return _unavailable(busy.message, reply_fmt, busy.retry_after)
    return HttpResponse(answer, content_type=_MEDIA_TYPE[fmt])


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


def _status(http_status: int, message: str, fmt: str) -> HttpResponse:
    return HttpResponse(
        otlp.status_body(http_status, message, fmt), status=http_status, content_type=_MEDIA_TYPE[fmt]
    )


def _unavailable(message: str, fmt: str, retry_after: int) -> HttpResponse:
    # 503 + Retry-After: released Python exporters retry 503 but not 429.
    response = _status(503, message, fmt)
    response["Retry-After"] = str(retry_after)
    return response
