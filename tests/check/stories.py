"""The demo's migration story recorded through the ctxview SDK and the OpenTelemetry SDK, and written
as OTLP files by the OpenTelemetry exporters' own encoders (protobuf as OTLP/HTTP sends it, OTLP/JSON as
the JSON exporter sends it): what an agent's test run leaves for ``ctxview check``.

``fixed``: the same story with its two regressions undone (no date line in the system prompt, the tool
schemas serialised in one key order), the run a fix would make.
"""

import gzip
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as encode_json
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxview_sdk
from ctxview.demo import migration
from ctxview.demo.recorder import Piece, Recorder


@contextmanager
def _story(steps: int | None, fixed: bool):
    saved = migration.STEPS, migration.DATE_FROM, migration.KEY_ORDER_FROM
    if steps is not None:
        migration.STEPS = steps
    if fixed:
        migration.DATE_FROM = migration.KEY_ORDER_FROM = migration.STEPS + 1
    try:
        yield migration
    finally:
        migration.STEPS, migration.DATE_FROM, migration.KEY_ORDER_FROM = saved


def migration_spans(fixed: bool = False, steps: int | None = None) -> tuple:
    """The finished spans of the migration story (``steps`` calls; the story's 80 by default)."""
    with _story(steps, fixed) as story:
        return recorded(story.record, migration.SERVICE)


def recorded(record: Callable[[], object], service: str) -> tuple:
    """The finished spans of what ``record`` sends through the ctxview SDK."""
    memory = InMemorySpanExporter()
    ctxview_sdk.configure(service_name=service, send_content=True, content_limit=65536, _exporter=memory)
    try:
        record()
        assert ctxview_sdk.flush(timeout=30.0)
    finally:
        ctxview_sdk.shutdown(timeout=5.0)
    return memory.get_finished_spans()


def pinned_rule_dropped() -> tuple:
    """Three calls through the demo's recorder: a pinned rule in the first two, left out of the third
    for the budget (the mistake ``--require-pinned`` is for)."""
    system = Piece("system:prompt", "system", "system", "You maintain the order service.", role="system")
    rule = Piece(
        "rule:public-api",
        "rule",
        "memory",
        "Do not change the public API of the order service.",
        role="user",
        pinned=True,
    )
    turns = [
        Piece(f"msg:{turn}", "message", "conversation", f"Step {turn}, go on.", role="user")
        for turn in (1, 2, 3)
    ]

    def record() -> None:
        recorder = Recorder("check-pinned", "claude-sonnet-4-5")
        start = datetime(2026, 11, 25, 14, 0, tzinfo=UTC)
        for turn in (1, 2, 3):
            pieces = [system, *([rule] if turn < 3 else []), *turns[:turn]]
            excluded = [{"id": rule.id, "reason": "budget"}] if turn == 3 else []
            recorder.call(turn, start + timedelta(seconds=30 * turn), pieces, excluded)

    return recorded(record, "order-agent")


def write_protobuf(path: Path, spans: Sequence, gzipped: bool = True) -> Path:
    """One OTLP/HTTP protobuf request body, gzipped as the exporter's gzip compression sends it."""
    body = encode_spans(spans).SerializeToString()
    path.write_bytes(gzip.compress(body) if gzipped else body)
    return path


def write_json_lines(path: Path, spans: Sequence, per_line: int = 32) -> Path:
    """OTLP/JSON requests of ``per_line`` spans, one a line, as a file exporter writes them."""
    lines = [
        encode_json(spans[start : start + per_line]).to_json() for start in range(0, len(spans), per_line)
    ]
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def write_json(path: Path, spans: Sequence) -> Path:
    """One OTLP/JSON request body."""
    path.write_text(encode_json(spans).to_json())
    return path
