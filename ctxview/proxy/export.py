"""Recording and sending, off the request path, between the proxy and the receiver.

No Django here. ``Recorder.record`` turns a finished exchange into a span (``record``, ``runs``) and
writes it to the spool; the sending thread sends the spool's oldest spans with the OpenTelemetry SDK's
OTLP/HTTP protobuf exporter, and removes them once the receiver took them. While the receiver is down or
refuses, spans wait on disk and the thread retries with a growing pause. The proxy runs both in its
recording process (``recording``); ``Recorder.submit`` records on a thread of the calling process
instead (never blocks: a full hand-off queue drops the call, with a counter and a log line), for a proxy
served in-process (tests).
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import threading
import time

import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ctxview.proxy import record
from ctxview.proxy.exchange import Exchange, discard_body
from ctxview.proxy.runs import Runs, window_of
from ctxview.proxy.spool import Spool

logger = logging.getLogger("ctxview.proxy")

SCOPE = InstrumentationScope("ctxview.proxy", "1")
SERVICE_NAME = "service.name"
DEFAULT_SERVICE = "ctxview-proxy"
QUEUE_SIZE = 1_000
BATCH = 64
# Answers that will not change on a retry: the batch (or the one span) is dropped, with a log line.
FINAL = {400, 413, 415}


def service_of(user_agent: str) -> str:
    """The client's product name from its User-Agent (``claude-cli/2.1 (…)`` -> ``claude-cli``)."""
    product = user_agent.strip().split(" ", 1)[0].split("/", 1)[0].strip().lower()
    return product[:100] or DEFAULT_SERVICE


def span_of(exchange: Exchange, run_attributes: dict, attributes: dict | None = None) -> dict:
    """The spooled form of a recorded call: what ``to_readable`` rebuilds a span from."""
    if attributes is None:
        attributes = record.attributes_of(exchange)
    attributes = attributes | run_attributes
    model = attributes.get(record.REQUEST_MODEL, "")
    return {
        "trace_id": secrets.token_hex(16),
        "span_id": secrets.token_hex(8),
        "name": f"chat {model}".strip(),
        "start_ns": exchange.start_ns,
        "end_ns": exchange.end_ns,
        "error": record.ERROR_TYPE in attributes,
        "service": service_of(exchange.request_headers.get("user-agent", "")),
        "attributes": attributes,
    }


def to_readable(span: dict) -> ReadableSpan:
    context = SpanContext(
        trace_id=int(span["trace_id"], 16),
        span_id=int(span["span_id"], 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return ReadableSpan(
        name=span["name"],
        context=context,
        resource=Resource({SERVICE_NAME: span["service"]}),
        attributes=span["attributes"],
        kind=SpanKind.CLIENT,
        instrumentation_scope=SCOPE,
        status=Status(StatusCode.ERROR) if span["error"] else Status(StatusCode.UNSET),
        start_time=span["start_ns"],
        end_time=span["end_ns"],
    )


class Sender:
    """Sends the spool's spans to ``send_to`` (a ctxview receiver) with ``Authorization: Bearer key``."""

    def __init__(
        self,
        spool: Spool,
        send_to: str,
        key: str,
        timeout_s: float = 10.0,
        pause_s: float = 0.5,
        max_pause_s: float = 30.0,
    ) -> None:
        self.spool = spool
        self.pause_s = pause_s
        self.max_pause_s = max_pause_s
        self.sent = 0
        self.refused = 0
        self._status: int | None = None
        self._location: str | None = None
        session = requests.Session()
        session.hooks["response"].append(self._remember_status)
        self.exporter = OTLPSpanExporter(
            endpoint=send_to.rstrip("/") + "/v1/traces",
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
            session=session,
        )
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ctxview-proxy-sender", daemon=True)

    def _remember_status(self, response, *args, **kwargs):
        self._status = response.status_code
        self._location = response.headers.get("Location")
        return response

    def start(self) -> None:
        self._thread.start()

    def stop(self, drain_s: float = 2.0) -> None:
        """Stop after trying to send what is spooled for up to ``drain_s``; the rest stays on disk."""
        self.wait_idle(drain_s)
        self._stop.set()
        self.wake.set()
        # Before the join: it ends the exporter's own retries (up to its timeout while the receiver is
        # down); a batch cut short stays in the spool.
        self.exporter.shutdown()
        self._thread.join(timeout=drain_s + 15)

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether the spool became empty within ``timeout_s`` (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if len(self.spool) == 0 and self._idle.is_set():
                return True
            self.wake.set()
            time.sleep(0.02)
        return len(self.spool) == 0

    def _export(self, spans: list[tuple[str, dict]]) -> tuple[bool, int | None]:
        self._status = None
        try:
            result = self.exporter.export([to_readable(span) for _name, span in spans])
        except Exception:  # a span the SDK cannot encode: as final as a 400
            logger.exception("could not encode %d recorded calls", len(spans))
            return False, 400
        # The exporter follows no redirect and counts a 3xx as sent: only a 2xx has stored the calls.
        return result is SpanExportResult.SUCCESS and 200 <= (self._status or 0) < 300, self._status

    def _run(self) -> None:
        pause = self.pause_s
        down_since: float | None = None
        while not self._stop.is_set():
            batch = self.spool.oldest(BATCH)
            if not batch:
                self._idle.set()
                self.wake.wait(timeout=1.0)
                self.wake.clear()
                continue
            self._idle.clear()
            ok, status = self._export(batch)
            if ok:
                self.spool.remove([name for name, _span in batch])
                self.sent += len(batch)
                if down_since is not None:
                    logger.info("receiver is back: sending the spooled calls (%d left)", len(self.spool))
                down_since, pause = None, self.pause_s
                continue
            if status in FINAL:
                self._send_one_by_one(batch) if len(batch) > 1 else self._refuse(batch, status)
                continue
            if down_since is None:
                down_since = time.monotonic()
                reason = f"HTTP {status}" if status else "unreachable or timed out"
                if status and 300 <= status < 400:
                    reason += f" (a redirect to {self._location}: give --send-to the receiver's own URL)"
                logger.warning(
                    "receiver %s: %d recorded calls kept in the spool, retrying", reason, len(self.spool)
                )
            self._stop.wait(pause)
            pause = min(pause * 2, self.max_pause_s)

    def _send_one_by_one(self, batch: list[tuple[str, dict]]) -> None:
        for entry in batch:
            ok, status = self._export([entry])
            if ok:
                self.spool.remove([entry[0]])
                self.sent += 1
            elif status in FINAL:
                self._refuse([entry], status)
            else:
                return  # the receiver went away: the rest waits in the spool

    def _refuse(self, batch: list[tuple[str, dict]], status: int | None) -> None:
        self.spool.remove([name for name, _span in batch])
        self.refused += len(batch)
        logger.warning("receiver refused a recorded call (HTTP %s): dropped, %d so far", status, self.refused)


class Recorder:
    """Turns finished exchanges into spooled spans on a thread of its own."""

    def __init__(self, spool: Spool, sender: Sender | None = None, runs: Runs | None = None) -> None:
        self.spool = spool
        self.sender = sender
        self.runs = runs or Runs()
        self.dropped = 0
        self.recorded = 0
        self._queue: queue.Queue[Exchange | None] = queue.Queue(maxsize=QUEUE_SIZE)
        self._thread = threading.Thread(target=self._run, name="ctxview-proxy-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if self.sender is not None:
            self.sender.start()

    def submit(self, exchange: Exchange) -> None:
        """Hand a finished exchange over; never waits."""
        try:
            self._queue.put_nowait(exchange)
        except queue.Full:
            discard_body(exchange)
            self.dropped += 1
            logger.warning("recording is behind: a call was not recorded (%d so far)", self.dropped)

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Whether every submitted call was recorded and sent within ``timeout_s`` (tests, shutdown)."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        if self._queue.unfinished_tasks:
            return False
        return self.sender is None or self.sender.wait_idle(max(deadline - time.monotonic(), 0))

    def stop(self, drain_s: float = 2.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout=drain_s + 5)
        if self.sender is not None:
            self.sender.stop(drain_s)

    def record(self, exchange: Exchange) -> None:
        """Turn one exchange into a spooled span, on the calling thread; then remove its spilled answer."""
        if exchange.response_body_path:
            try:
                with open(exchange.response_body_path, "rb") as file:
                    exchange.response_body = file.read()
            except FileNotFoundError:
                # Removed only once recorded: a recording process that died before forgetting the
                # exchange left it in Pending, and its span is already spooled.
                logger.info("%s: already recorded", os.path.basename(exchange.response_body_path))
                return
            except OSError as exc:
                logger.warning("could not read a recorded answer (%s): recorded without it", exc)
        try:
            self._record(exchange)
        finally:
            discard_body(exchange)

    def _record(self, exchange: Exchange) -> None:
        try:
            attributes = record.attributes_of(exchange)
            window = None
            if self.runs.chains(exchange.request_headers):  # a run or session header names the run
                window = window_of(
                    attributes.get(record.SYSTEM_INSTRUCTIONS),
                    attributes.get(record.TOOL_DEFINITIONS),
                    attributes.get(record.INPUT_MESSAGES),
                    attributes.get(record.RESPONSE_ID, ""),
                    attributes.get(record.OPENAI_PREVIOUS_RESPONSE, ""),
                )
            run_attributes = self.runs.attributes(
                exchange.request_headers, exchange.key_hash, exchange.route, exchange.start_ns / 1e9, window
            )
            self.spool.put(span_of(exchange, run_attributes, attributes))
            self.recorded += 1
            if self.sender is not None:
                self.sender.wake.set()
        except Exception:  # one unreadable exchange must not stop the recording
            logger.exception("could not record a call to %s", exchange.path)

    def _run(self) -> None:
        while True:
            exchange = self._queue.get()
            try:
                if exchange is None:
                    return
                self.record(exchange)
            finally:
                self._queue.task_done()
