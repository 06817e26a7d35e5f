"""Fixtures for the SDK tests: no Django, no database; spans captured in memory."""

from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ctxview_sdk


@pytest.fixture
def configure_memory() -> Iterator[Callable[..., InMemorySpanExporter]]:
    """Configure the SDK with an in-memory exporter (extra options passed to configure); shut down after."""

    def configure(**options) -> InMemorySpanExporter:
        memory = InMemorySpanExporter()
        ctxview_sdk.configure(_exporter=memory, **options)
        return memory

    yield configure
    ctxview_sdk.shutdown(timeout=2.0)


@pytest.fixture
def finished(configure_memory) -> Callable[[], list[ReadableSpan]]:
    """The default configuration (no content sent); call the fixture's value to flush and get the spans."""
    memory = configure_memory()

    def spans() -> list[ReadableSpan]:
        assert ctxview_sdk.flush(timeout=5.0)
        return list(memory.get_finished_spans())

    return spans
