"""``configure()``, ``flush()`` and ``shutdown()``: the SDK's own OpenTelemetry pipeline to ctxview.

The SDK never touches the global TracerProvider: the agent may have its own tracing, sampling and
exporters, and ctxview must neither change them nor be changed by them. Spans go into a bounded
in-memory queue; a background thread (the BatchSpanProcessor's) exports them with a per-request timeout.
When ctxview is down, slow or answering errors, the queue fills and the oldest spans are dropped: the
agent is never made to wait.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, Tracer, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from . import tokens
from .manifest import MAX_CONTENT
from .version import __version__

logger = logging.getLogger("ctxview_sdk")

ENDPOINT_ENV = "CTXVIEW_ENDPOINT"
KEY_ENV = "CTXVIEW_KEY"

# Bounded on purpose: at most this many spans wait in memory; beyond it the oldest are dropped.
MAX_QUEUE = 1024
# A span can carry a 2 MB manifest; 32 of them stay inside ctxview's default 64 MiB request limit.
MAX_BATCH = 32
SCHEDULE_DELAY_MS = 1000


@dataclass(frozen=True)
class Settings:
    """What ``configure()`` was given, after validation."""

    endpoint: str | None
    service_name: str
    send_content: bool
    content_limit: int
    redact: Callable[[str], str] | None
    timeout: float


class _Guard(SpanExporter):
    """Wraps the exporter, so a shutdown that ran out of time can make the rest of the queue go quietly."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.abandoned = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.abandoned.is_set():
            return SpanExportResult.FAILURE
        return self.inner.export(spans)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def shutdown(self) -> None:
        if not self.abandoned.is_set():
            self.inner.shutdown()

    def abandon(self) -> None:
        """Drop what is still queued; also ends the exporter's retry back-off at once."""
        if not self.abandoned.is_set():
            self.abandoned.set()
            self.inner.shutdown()


@dataclass(frozen=True)
class Pipeline:
    """The SDK's tracer with the provider, processor and exporter behind it."""

    settings: Settings
    provider: TracerProvider
    processor: BatchSpanProcessor
    exporter: _Guard
    tracer: Tracer


_lock = threading.Lock()
_active: Pipeline | None = None
_warned_unconfigured = False


def configure(
    endpoint: str | None = None,
    key: str | None = None,
    service_name: str = "agent",
    send_content: bool = False,
    content_limit: int = 8192,
    redact: Callable[[str], str] | None = None,
    timeout: float = 5.0,
    *,
    _exporter: SpanExporter | None = None,
) -> None:
    """Send calls to ctxview at ``endpoint`` with ingest ``key`` (default $CTXVIEW_ENDPOINT, $CTXVIEW_KEY)."""
    global _active
    endpoint = endpoint or os.environ.get(ENDPOINT_ENV) or None
    key = key or os.environ.get(KEY_ENV) or None
    if type(content_limit) is not int or not 0 < content_limit <= MAX_CONTENT:
        raise ValueError(f"content_limit must be an int in 1..{MAX_CONTENT}, got {content_limit!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if redact is not None and not callable(redact):
        raise ValueError("redact must be a function str -> str, or None")
    if not (isinstance(service_name, str) and service_name):
        raise ValueError("service_name must be a non-empty string")
    exporter = _Guard(_exporter if _exporter is not None else _otlp_exporter(endpoint, key, float(timeout)))
    settings = Settings(
        endpoint=endpoint,
        service_name=service_name,
        send_content=bool(send_content),
        content_limit=content_limit,
        redact=redact,
        timeout=float(timeout),
    )
    processor = BatchSpanProcessor(
        exporter,
        max_queue_size=MAX_QUEUE,
        schedule_delay_millis=SCHEDULE_DELAY_MS,
        max_export_batch_size=MAX_BATCH,
        export_timeout_millis=timeout * 1000,
    )
    provider = TracerProvider(
        resource=Resource.create({"service.name": service_name}),
        # Always sample: the agent's OTEL_TRACES_SAMPLER or an unsampled parent must not drop manifests.
        sampler=ALWAYS_ON,
        # Fixed limits, not the OTEL_*_LIMIT environment: a value-length limit would cut the manifest's
        # JSON, an attribute-count limit would drop usage figures.
        span_limits=SpanLimits(
            max_attributes=64,
            max_span_attributes=64,
            max_attribute_length=SpanLimits.UNSET,
            max_span_attribute_length=SpanLimits.UNSET,
        ),
        # Our own atexit hook below bounds the wait at exit; the provider's would wait up to 30 s.
        shutdown_on_exit=False,
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("ctxview_sdk", __version__)
    pipeline = Pipeline(settings, provider, processor, exporter, tracer)
    tokens.preload()
    with _lock:
        previous, _active = _active, pipeline
    if previous is not None:
        logger.info("ctxview_sdk: configured again; the previous pipeline is shut down")
        _shutdown_pipeline(previous, timeout=previous.settings.timeout)


def flush(timeout: float | None = None) -> bool:
    """Export what is queued, waiting at most ``timeout`` s (default: as configured); True if all went."""
    pipeline = _active
    if pipeline is None:
        return True
    wait = pipeline.settings.timeout if timeout is None else timeout
    return _bounded(lambda: pipeline.provider.force_flush(int(wait * 1000)), wait)


def shutdown(timeout: float | None = None) -> None:
    """Flush and stop, waiting at most ``timeout`` s (default: as configured); later calls are not sent."""
    global _active
    with _lock:
        pipeline, _active = _active, None
    if pipeline is not None:
        _shutdown_pipeline(pipeline, pipeline.settings.timeout if timeout is None else timeout)


def active() -> Pipeline | None:
    """The current pipeline, or None before ``configure()`` and after ``shutdown()``."""
    return _active


def warn_unconfigured() -> None:
    """Say once that calls are being dropped because ``configure()`` was not called."""
    global _warned_unconfigured
    if not _warned_unconfigured:
        _warned_unconfigured = True
        logger.warning("ctxview_sdk: not configured (call ctxview_sdk.configure()); calls are not recorded")


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for a ctxview base URL (a URL already ending in /v1/traces is kept)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces"


def _otlp_exporter(endpoint: str | None, key: str | None, timeout: float) -> SpanExporter:
    import requests
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if not (isinstance(endpoint, str) and endpoint.startswith(("http://", "https://"))):
        raise ValueError(f"endpoint must be an http(s) URL (or set ${ENDPOINT_ENV}), got {endpoint!r}")
    if not (isinstance(key, str) and key and not any(char.isspace() for char in key)):
        raise ValueError(f"key must be a ctxview ingest key without spaces (or set ${KEY_ENV})")
    authorization = {"Authorization": f"Bearer {key}"}
    session = requests.Session()
    session.hooks["response"].append(_warn_of_redirect)
    exporter = OTLPSpanExporter(
        endpoint=traces_url(endpoint),
        headers=authorization,
        timeout=timeout,
        compression=Compression.Gzip,
        session=session,
    )
    # The OTel exporter also merges OTEL_EXPORTER_OTLP_(TRACES_)HEADERS from the environment: those are the
    # agent's credentials for its own collector and must not be sent to ctxview. Private attribute of
    # opentelemetry-exporter-otlp-proto-http 1.45 (pinned); if it moves, those headers go along, as they
    # would with any OTel exporter.
    client_headers = getattr(getattr(exporter, "_client", None), "_headers", None)
    if isinstance(client_headers, dict):
        for name in list(client_headers):
            if name.lower() not in ("content-type", "user-agent", "content-encoding"):
                del client_headers[name]
        client_headers.update(authorization)
    return exporter


def _warn_of_redirect(response, *args, **kwargs):
    # The OTLP exporter follows no redirect (the key must not travel on) and counts a 3xx as sent: say so,
    # or the calls vanish without a word (an http:// endpoint behind a redirect to https:// does this).
    if 300 <= response.status_code < 400:
        logger.warning(
            "ctxview_sdk: the endpoint answered %s, a redirect to %s; the calls were not stored: configure "
            "the final URL",
            response.status_code,
            response.headers.get("Location"),
        )
    return response


def _shutdown_pipeline(pipeline: Pipeline, timeout: float) -> None:
    # The processor would wait up to 30 s for slow exports; the agent waits at most ``timeout``, then the
    # rest of the queue is dropped (a request already in flight ends by its own timeout).
    if not _bounded(pipeline.provider.shutdown, timeout):
        pipeline.exporter.abandon()
        logger.warning(
            "ctxview_sdk: shutdown did not finish within %.1f s; unsent calls are dropped", timeout
        )


def _bounded(work: Callable[[], Any], timeout: float) -> bool:
    """Run ``work`` in a daemon thread and wait at most ``timeout`` s: a hung export never holds the agent."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except Exception:
            logger.exception("ctxview_sdk: flush or shutdown failed")
            outcome.append(False)

    thread = threading.Thread(target=run, name="ctxview_sdk-flush", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no new threads this late in interpreter shutdown: do it inline
        run()
    else:
        thread.join(timeout)
    return bool(outcome) and outcome[0] is not False


atexit.register(shutdown)
