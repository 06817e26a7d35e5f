"""OTLP/HTTP receiver: POST /v1/traces and /v1/logs.

Read and decompress the body, then hand it to ingest.accept, the path both receivers share: validate,
store the raw batch, enqueue its processing on commit. The 200 is sent only after the batch is
committed; everything after that can fail and be retried from the stored batch.
"""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from ingest import accept, otlp
from ingest.keys import key_from_request

_MEDIA_TYPE = {otlp.PROTOBUF: "application/x-protobuf", otlp.JSON: "application/json"}


@csrf_exempt
def receive_traces(request: HttpRequest) -> HttpResponse:
    return _receive(request, otlp.TRACES)


@csrf_exempt
def receive_logs(request: HttpRequest) -> HttpResponse:
    return _receive(request, otlp.LOGS)


def _receive(request: HttpRequest, signal: str) -> HttpResponse:
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
        body = _read_body(request)
        data = otlp.decompress(
            body, request.headers.get("Content-Encoding", ""), settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES
        )
        answer = accept.accept(project, signal, data, fmt, wire_bytes=len(body))
    except accept.Unavailable as exc:
        return _unavailable(exc.message, reply_fmt, exc.retry_after)
    except otlp.OtlpError as exc:
        return _status(exc.status, exc.message, reply_fmt)
    return HttpResponse(answer, content_type=_MEDIA_TYPE[fmt])


def _read_body(request: HttpRequest) -> bytes:
    limit = settings.CTXVIEW_INGEST_MAX_BODY_BYTES
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        raise otlp.BadRequest("Content-Length is not a number") from None
    if declared > limit:
        raise otlp.TooLarge(f"body is {declared} bytes; the limit is {limit}")
    body = request.read(limit + 1)
    if len(body) > limit:
        raise otlp.TooLarge(f"body is larger than the limit of {limit} bytes")
    return body


def _status(http_status: int, message: str, fmt: str) -> HttpResponse:
    return HttpResponse(
        otlp.status_body(http_status, message, fmt), status=http_status, content_type=_MEDIA_TYPE[fmt]
    )


def _unavailable(message: str, fmt: str, retry_after: int) -> HttpResponse:
    # 503 + Retry-After: released Python exporters retry 503 but not 429.
    response = _status(503, message, fmt)
    response["Retry-After"] = str(retry_after)
    return response
