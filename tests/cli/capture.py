"""A local OTLP/HTTP receiver that keeps every export request exactly as it arrived.

Stdlib ``http.server`` on 127.0.0.1 (port 0). It answers ``POST /v1/traces``, ``/v1/logs`` and
``/v1/metrics`` (any path prefix, since some CLIs append the signal path to a base URL and some do
not), in protobuf or JSON, plain, gzip or deflate, with an empty success response in the request's
own format. Every request is stored with its headers and raw body; traces and logs are also decoded
through ctxview's own decoder (``ingest.otlp``) and turned into OTLP/JSON (hex ids, enums as numbers)
for the fixtures. A body that does not decode is still stored, with the reason, and answered 400: a
recording must show what the CLI really sent, not what we hoped for.

    with CaptureReceiver() as receiver:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        ...
        receiver.wait_quiet(2.0)
        documents = receiver.documents("logs")
"""

from __future__ import annotations

import base64
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from ingest import otlp

METRICS = "metrics"
SIGNALS = (otlp.TRACES, otlp.LOGS, METRICS)
# Far above anything a CLI sends in one export; a runaway exporter still cannot fill the memory.
BODY_LIMIT = 64 * 1024 * 1024
_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


@dataclass
class Capture:
    """One export request as received, and (when it decoded) the same request as OTLP/JSON."""

    index: int
    path: str
    signal: str | None
    content_type: str
    content_encoding: str
    user_agent: str
    raw: bytes
    received_at: float
    document: dict[str, Any] | None = None
    error: str | None = None

    def describe(self) -> dict[str, Any]:
        """The fixture's view of this request: everything but the raw bytes."""
        return {
            "index": self.index,
            "path": self.path,
            "signal": self.signal,
            "content_type": self.content_type,
            "content_encoding": self.content_encoding,
            "user_agent": self.user_agent,
            "bytes": len(self.raw),
            "error": self.error,
            "body": self.document,
        }


def otlp_json(message) -> dict[str, Any]:
    """An export request as OTLP/JSON: camelCase keys, enums as numbers, trace and span ids as hex."""
    document = MessageToDict(message, use_integers_for_enums=True)

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                if name in _ID_FIELDS and isinstance(value, str):
                    node[name] = base64.b64decode(value).hex()
                else:
                    fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(document)
    return document


def decode(signal: str, raw: bytes, content_type: str, content_encoding: str) -> dict[str, Any]:
    """Decode one request body as ctxview's receiver would; raises ``otlp.OtlpError`` when it cannot."""
    fmt = otlp.body_format(content_type)
    data = otlp.decompress(raw, content_encoding, BODY_LIMIT)
    if signal == METRICS:
        message = ExportMetricsServiceRequest()
        if fmt == otlp.PROTOBUF:
            message.ParseFromString(data)
        else:
            from google.protobuf.json_format import Parse

            Parse(data, message, ignore_unknown_fields=True)
        return otlp_json(message)
    return otlp_json(otlp.parse_request(signal, data, fmt))


@dataclass
class CaptureReceiver:
    """A threaded OTLP/HTTP server that records every request."""

    captures: list[Capture] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._last_request = 0.0

    def start(self) -> CaptureReceiver:
        receiver = self

        class Handler(_Handler):
            capture = receiver

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="otlp-capture", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> CaptureReceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the receiver is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add(self, capture: Capture) -> None:
        with self._lock:
            capture.index = len(self.captures)
            self.captures.append(capture)
            self._last_request = time.monotonic()

    def wait_quiet(self, seconds: float, timeout: float = 30.0) -> None:
        """Wait until no request has arrived for ``seconds`` (exporters flush on their own timers)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = time.monotonic() - self._last_request
            if idle >= seconds:
                return
            time.sleep(0.1)

    def documents(self, signal: str) -> list[dict[str, Any]]:
        """The decoded OTLP/JSON bodies of one signal, in arrival order."""
        with self._lock:
            return [c.document for c in self.captures if c.signal == signal and c.document is not None]

    @property
    def errors(self) -> list[str]:
        with self._lock:
            return [f"{c.path}: {c.error}" for c in self.captures if c.error]


def read_body(handler: BaseHTTPRequestHandler, limit: int = BODY_LIMIT) -> bytes:
    """The request body, with Content-Length or chunked (Node's HTTP exporters send chunked bodies)."""
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        body = bytearray()
        while True:
            size = int(handler.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            if len(body) + size > limit:
                raise ValueError(f"body is larger than {limit} bytes")
            body += handler.rfile.read(size)
            handler.rfile.readline()  # the CRLF after each chunk
    length = int(handler.headers.get("Content-Length") or 0)
    if length > limit:
        raise ValueError(f"body is {length} bytes; the limit is {limit}")
    return handler.rfile.read(length) if length else b""


class _Handler(BaseHTTPRequestHandler):
    capture: CaptureReceiver
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # the recorder prints its own summary
        pass

    def do_POST(self) -> None:
        raw = read_body(self)
        path = self.path.split("?", 1)[0]
        signal = next((s for s in SIGNALS if path.rstrip("/").endswith("/" + s)), None)
        content_type = self.headers.get("Content-Type", "")
        capture = Capture(
            index=-1,
            path=path,
            signal=signal,
            content_type=content_type,
            content_encoding=self.headers.get("Content-Encoding", ""),
            user_agent=self.headers.get("User-Agent", ""),
            raw=raw,
            received_at=time.time(),
        )
        fmt = otlp.JSON if "json" in content_type.lower() else otlp.PROTOBUF
        if signal is None:
            capture.error = f"unknown OTLP path {path}"
            self.capture.add(capture)
            self._send(404, otlp.status_body(404, capture.error, fmt), fmt)
            return
        try:
            capture.document = decode(signal, raw, content_type, capture.content_encoding)
        except otlp.OtlpError as exc:
            capture.error = exc.message
        except Exception as exc:  # a metrics body ctxview's decoder does not cover
            capture.error = f"{type(exc).__name__}: {exc}"
        self.capture.add(capture)
        if capture.error:
            self._send(400, otlp.status_body(400, capture.error, fmt), fmt)
        else:
            self._send(200, b"{}" if fmt == otlp.JSON else b"", fmt)

    def _send(self, status: int, payload: bytes, fmt: str) -> None:
        self.send_response(status)
        content_type = "application/json" if fmt == otlp.JSON else "application/x-protobuf"
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
