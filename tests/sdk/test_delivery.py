"""Export over real OTLP/HTTP to local servers: the agent is never blocked or raised into.

A correctness check that recording is non-blocking, not a benchmark: the bounds are generous.
"""

import gzip
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import ctxview_sdk
from ctxview_sdk.tokens import estimate_tokens

pytestmark = pytest.mark.timing  # asserts how long things take: make test runs it alone

REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": "You are a coding agent. " * 50,
    "tools": [
        {"name": f"tool_{n}", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}
        for n in range(10)
    ],
    "messages": [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} " * 40} for n in range(30)
    ],
}
RESPONSE = {
    "id": "msg_1",
    "model": "claude-sonnet-4-5",
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10, "cache_read_input_tokens": 3000, "output_tokens": 50},
}


class Collector:
    """A local OTLP/HTTP endpoint answering ``status`` after ``delay`` seconds, keeping what it got."""

    def __init__(self, status: int = 200, delay: float = 0.0) -> None:
        self.status, self.delay = status, delay
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.arrived = threading.Event()
        self.release = threading.Event()  # ends a slow answer early at teardown
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                collector.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                collector.arrived.set()
                collector.release.wait(collector.delay)
                try:
                    self.send_response(collector.status)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:  # the client gave up (timeout) first
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[type[Collector]]:
    servers: list[Collector] = []

    def start(**options) -> Collector:
        servers.append(Collector(**options))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def background_work_stops() -> Iterator[None]:
    """After shutdown, the SDK's export thread ends within one request timeout: nothing lingers."""
    before = set(threading.enumerate())
    yield
    ctxview_sdk.shutdown(timeout=1.0)
    exporters = [t for t in set(threading.enumerate()) - before if t.name.startswith("OtelBatch")]
    for thread in exporters:
        thread.join(5.0)
    assert not [thread for thread in exporters if thread.is_alive()]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def record_calls(count: int = 50) -> float:
    """Record ``count`` calls the way an agent would; return the seconds the agent spent in the SDK."""
    estimate_tokens("warm-up")  # loading the tokenizer once is not what these tests measure
    start = time.monotonic()
    for turn in range(1, count + 1):
        ctxview_sdk.record_anthropic(
            "run-delivery", turn, REQUEST, RESPONSE, excluded=[("msg:old", "budget")]
        )
        with ctxview_sdk.call("run-delivery", turn, "claude-sonnet-4-5") as call:
            call.add_item("progress", "progress", "memory", content=f"step {turn}")
    return time.monotonic() - start


def unblocked_seconds(collector) -> float:
    """What record_calls() takes on this machine when every export is answered at once: a loaded machine is
    slower at the SDK's own work too, which is not what these tests are about."""
    ctxview_sdk.configure(collector().url, key="k", timeout=1.0)
    seconds = record_calls()
    ctxview_sdk.shutdown(timeout=5.0)
    return seconds


def timed(function, *args) -> tuple[float, object]:
    start = time.monotonic()
    result = function(*args)
    return time.monotonic() - start, result


def test_spans_arrive_as_otlp_protobuf_with_key_and_gzip(collector, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-other-collector-secret=s3cret")
    server = collector()
    ctxview_sdk.configure(server.url + "/", key="cvk_test", service_name="demo-agent", timeout=5.0)
    ctxview_sdk.record_anthropic("run-wire", 1, REQUEST, RESPONSE)
    assert ctxview_sdk.flush(timeout=5.0)
    path, headers, body = server.requests[0]
    assert path == "/v1/traces"
    assert headers["authorization"] == "Bearer cvk_test"
    assert headers["content-type"] == "application/x-protobuf"
    assert headers["content-encoding"] == "gzip"
    assert "x-other-collector-secret" not in headers  # the agent's own collector credentials stay home
    export = ExportTraceServiceRequest.FromString(gzip.decompress(body))
    (resource_spans,) = export.resource_spans
    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
    (span,) = resource_spans.scope_spans[0].spans
    attributes = {a.key: a.value for a in span.attributes}
    assert (service, span.name, resource_spans.scope_spans[0].scope.name) == (
        "demo-agent",
        "chat claude-sonnet-4-5",
        "ctxview_sdk",
    )
    assert attributes["ctxview.turn"].int_value == 1
    assert attributes["gen_ai.usage.input_tokens"].int_value == 3010
    assert attributes["ctxview.manifest"].string_value.startswith('{"schema":"ctxview.manifest/1"')


# An export that blocked the agent would cost it at least the export's timeout (1 s) on top of its own work:
# allowed are that work as measured plus half the timeout (1 s in all at least, as before).
def test_a_closed_port_neither_blocks_nor_raises(collector):
    unblocked = max(1.0, unblocked_seconds(collector) + 0.5)
    ctxview_sdk.configure(f"http://127.0.0.1:{closed_port()}", key="k", timeout=1.0)
    try:
        assert record_calls() < unblocked
        elapsed, _ = timed(ctxview_sdk.flush, 0.5)
        assert elapsed < 2.0
    finally:
        elapsed, _ = timed(ctxview_sdk.shutdown, 1.0)
    assert elapsed < 2.5


def test_a_slow_endpoint_neither_blocks_nor_raises(collector):
    unblocked = max(1.0, unblocked_seconds(collector) + 0.5)
    server = collector(delay=10.0)
    ctxview_sdk.configure(server.url, key="k", timeout=1.0)
    assert record_calls() < unblocked
    assert server.arrived.wait(5.0)  # the export did start, in the background
    elapsed, _ = timed(ctxview_sdk.flush, 0.5)
    assert elapsed < 2.0  # the answer would take 10 s
    elapsed, _ = timed(ctxview_sdk.shutdown, 1.0)
    assert elapsed < 2.5


def test_a_503_answer_does_not_raise(collector):
    server = collector(status=503)
    ctxview_sdk.configure(server.url, key="k", timeout=1.0)
    assert record_calls(5) < 1.0
    elapsed, flushed = timed(ctxview_sdk.flush, 3.0)
    assert server.requests and flushed in (True, False) and elapsed < 4.0
