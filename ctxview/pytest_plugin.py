"""The ctxview pytest plugin: check the context of the agent runs a test makes, with the engine and the
rules of ``ctxview check``.

Installed with ctxview (the ``pytest11`` entry point) and off unless asked: it captures spans only in a
session run with ``--ctxview`` (from the session's start) or once a test uses its fixtures.

- ``ctxview_spans``: the spans finished during the test (an in-memory exporter on the global tracer
  provider, which it sets when there is none, and on the ctxview SDK's pipeline);
  ``ctxview_spans.configure_sdk(**options)`` points the ctxview SDK at it.
- ``ctxview_runs``: call it for the runs those spans make (``CheckedRun``), as the server would store
  and analyse them.
- ``assert_no_cache_breaks(run, causes=("any",))`` and ``assert_in_window(run, item_or_text,
  at_turn=N)`` (importable from here).

It is loaded in every pytest session of an environment where ctxview is installed: until it is used it
imports only pytest and the assertions (plain Python), never OpenTelemetry, Django or the engine.
"""

import pytest

from ctxview.check.assertions import CheckedRun, assert_in_window, assert_no_cache_breaks

__all__ = ["CheckedRun", "assert_in_window", "assert_no_cache_breaks"]

_CAPTURE = pytest.StashKey["SpanCapture"]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("ctxview", "ctxview: check the context of agent runs")
    group.addoption(
        "--ctxview",
        action="store_true",
        default=False,
        help="capture spans for ctxview from the session's start, and list the checked runs at the end",
    )


def pytest_sessionstart(session) -> None:
    if session.config.getoption("ctxview", False):
        capture = _capture(session.config)
        capture.always = True
        capture.attach()


def pytest_terminal_summary(terminalreporter, config) -> None:
    capture = config.stash.get(_CAPTURE, None)
    if capture is None or not config.getoption("ctxview", False):
        return
    from ctxview.check import report

    terminalreporter.write_sep("-", f"ctxview: {len(capture.checked)} runs checked")
    for line in report.table(capture.checked):
        terminalreporter.write_line(line)


class SpanCapture:
    """The session's in-memory exporter and the tracer providers it listens to."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.providers: list = []
        # Spans are kept while a test that uses the fixtures runs, or all along with --ctxview.
        self.always = False
        self.recording = False
        self.checked: list[dict] = []  # a line per run checked in the session (--ctxview's summary)

    def attach(self) -> None:
        """Listen to the global tracer provider (setting one when there is none) and to the ctxview
        SDK's; safe to call again (a provider set since is added)."""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        import ctxview_sdk

        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            # No SDK provider yet (OpenTelemetry's proxy): instrumentations in the tests record to this one.
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        self._listen(provider)
        pipeline = ctxview_sdk.config.active()
        if pipeline is not None:
            self._listen(pipeline.provider)

    def _listen(self, provider) -> None:
        if all(known is not provider for known in self.providers):
            provider.add_span_processor(_forwarder(self))
            self.providers.append(provider)

    def forget(self, provider) -> None:
        self.providers = [known for known in self.providers if known is not provider]

    def flush(self) -> None:
        """Export what the providers (the ctxview SDK's batches them) still hold."""
        import ctxview_sdk

        for provider in self.providers:
            provider.force_flush()
        ctxview_sdk.flush()

    def finished(self) -> tuple:
        self.flush()
        return self.exporter.get_finished_spans()


def _forwarder(capture: SpanCapture):
    """A span processor that hands each span to the capture's exporter as it ends, while the capture
    records. Shutting a provider down (the ctxview SDK's, at each ``configure``) leaves it and the exporter
    working for the others: a SimpleSpanProcessor would shut the session's exporter down with it."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Forward(SpanProcessor):
        def on_end(self, span) -> None:
            if capture.recording or capture.always:
                capture.exporter.export((span,))

    return Forward()


def _discarding_exporter():
    """An exporter that sends nowhere: the ctxview SDK's own while the capture records its spans."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class Discard(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    return Discard()


def _capture(config) -> SpanCapture:
    capture = config.stash.get(_CAPTURE, None)
    if capture is None:
        capture = config.stash[_CAPTURE] = SpanCapture()
    return capture


class TestSpans:
    """The spans finished since the test began (a sequence)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, capture: SpanCapture) -> None:
        self.capture = capture
        self.exporter = capture.exporter
        self.start = len(capture.finished())
        self.sdk_provider = None

    def configure_sdk(self, **options) -> None:
        """Configure the ctxview SDK (``ctxview_sdk.configure``'s options) to record into this capture
        (and nowhere else) until the test ends."""
        import ctxview_sdk

        ctxview_sdk.configure(_exporter=_discarding_exporter(), **options)
        self.sdk_provider = ctxview_sdk.config.active().provider
        self.capture.attach()  # the capture listens to the SDK's new provider, as a span ends

    def close(self) -> None:
        import ctxview_sdk

        if self.sdk_provider is not None:
            active = ctxview_sdk.config.active()
            if active is not None and active.provider is self.sdk_provider:
                ctxview_sdk.shutdown()
            self.capture.forget(self.sdk_provider)
        self.capture.exporter.clear()  # the next test starts from an empty exporter

    def spans(self) -> list:
        return list(self.capture.finished()[self.start :])

    def __iter__(self):
        return iter(self.spans())

    def __len__(self) -> int:
        return len(self.spans())

    def __getitem__(self, index):
        return self.spans()[index]


class TestRuns:
    """``ctxview_runs()``: the runs the test's spans make, checked by the engine of ``ctxview check``."""

    __test__ = False

    def __init__(self, spans: TestSpans, name: str) -> None:
        self.test_spans = spans
        self.name = name

    def __call__(self) -> list[CheckedRun]:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from ctxview.check import engine, report
        from ctxview.check.inputs import Export
        from ingest import otlp

        spans = self.test_spans.spans()
        if not spans:
            return []
        decoded = otlp.validate(otlp.TRACES, encode_spans(spans))
        # Always in a child process: the engine configures Django for its whole process, and a test
        # process may have a Django of its own (now, or once a later test sets it up).
        runs = engine.analyse([Export(self.name, otlp.TRACES, decoded.message)], contents=True, isolated=True)
        self.test_spans.capture.checked += [report.run_row(run) for run in runs]
        return [CheckedRun(run) for run in runs]

    def one(self) -> CheckedRun:
        """The test's only run."""
        runs = self()
        if len(runs) != 1:
            raise AssertionError(f"one run expected, the test's spans make {len(runs)}: {runs}")
        return runs[0]


@pytest.fixture
def ctxview_spans(request):
    capture = _capture(request.config)
    capture.attach()
    capture.recording = True
    spans = TestSpans(capture)
    yield spans
    spans.close()
    capture.recording = False


@pytest.fixture
def ctxview_runs(request, ctxview_spans) -> TestRuns:
    return TestRuns(ctxview_spans, request.node.nodeid)
