"""Runs for the UI's view tests: the demo stories (and hostile ones) recorded through the real SDK once per
session, then posted to the real OTLP receiver with the test client (no live server needed).

Recording is the slow part (token counting, manifest building), so the encoded export requests are
cached; each test module that needs the runs posts them into its own project.
"""

import functools
import threading
from collections.abc import Callable, Sequence

from django.test import Client
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import ctxview_sdk
from ctxview import demo
from ctxview.celery import app as celery_app

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
HOSTILE_RUN = "hostile-<script>alert(3)</script>"


class Capture(SpanExporter):
    """Keeps the spans the SDK exports instead of sending them."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.lock:
            self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def record(service: str, story: Callable[[], object]) -> list[bytes]:
    """The OTLP/protobuf export requests the SDK would send for ``story()``, 32 spans each."""
    capture = Capture()
    ctxview_sdk.configure(
        "http://127.0.0.1:9", service_name=service, send_content=True, content_limit=65536, _exporter=capture
    )
    story()
    assert ctxview_sdk.flush(timeout=120)
    ctxview_sdk.shutdown(timeout=30)
    spans = sorted(capture.spans, key=lambda span: span.start_time)
    return [encode_spans(spans[start : start + 32]).SerializeToString() for start in range(0, len(spans), 32)]


def hostile_story() -> None:
    """A two-call run whose ids, sources, versions and content are markup, with a cache break between."""
    for seq in (1, 2):
        with ctxview_sdk.call(HOSTILE_RUN, seq, "claude-sonnet-4-5") as call:
            call.add_item(
                f"tool:{IMG}",
                "tool",
                "tools",
                content={"name": IMG, "description": SCRIPT * 40},
                tokens=700,
                trust="system",
            )
            call.add_item(
                SCRIPT,
                "system",
                "system",
                content=f"System prompt, version {seq}: {SCRIPT} {IMG}",
                role="system",
                tokens=600,
                source=IMG,
                version=f"v{seq}{SCRIPT}",
                pinned=True,
            )
            call.add_item(
                f"fact:{IMG}",
                "fact",
                "conversation",
                content=f"{IMG} is a fact",
                role="user",
                tokens=20,
            )
            call.exclude(f"old:{SCRIPT}", IMG, tokens=5, source=SCRIPT, version=IMG)
            call.set_budget(limit=8000, reserved_output=1000)
            call.set_usage(
                {
                    "input_tokens": 20,
                    "cache_creation_input_tokens": 1300 if seq == 1 else 1300,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 10,
                }
            )
            call.add_tool_call(IMG, id=f"toolu_{seq}")


@functools.cache
def demo_requests() -> tuple[bytes, ...]:
    """The three demo stories as export requests (recorded once per test session)."""
    bodies: list[bytes] = []
    for story in demo.STORIES:
        bodies += record(story.SERVICE, story.record)
    return tuple(bodies)


@functools.cache
def hostile_requests() -> tuple[bytes, ...]:
    return tuple(record(f"svc-{IMG}", hostile_story))


def post(bodies: Sequence[bytes], key: str) -> None:
    """Post export requests to /v1/traces; processing and analysis run in-process (eager tasks)."""
    client = Client()
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    try:
        for body in bodies:
            response = client.post(
                "/v1/traces",
                data=body,
                content_type="application/x-protobuf",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
            assert response.status_code == 200, response.content
    finally:
        celery_app.conf.task_always_eager = eager
