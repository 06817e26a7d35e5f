"""One span's path through the write side: the ingest modules it enters, in order, and how often it comes
back to a module it had left (issue 32).

    .venv/bin/python bench/span_path.py [--show]

An OTLP/protobuf request holding one chat span (made by the OpenTelemetry SDK, encoded by its OTLP
exporter's encoder) is posted to the receiver through Django's test client, on a throwaway SQLite
database with tasks in-process, so the one request takes the span from the receiver to a stored,
numbered and analysed call. A first request of the same run warms the process up (imports, caches); the
second is traced. Every Python call and return is seen (``sys.setprofile``); the module the path is "in"
is that of the innermost frame of an ``ingest`` module. Printed: the modules entered, the returns to a
module left before (in all and per module), and with ``--show`` the path itself.
"""

import argparse
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def chat_span_request(number: int) -> bytes:
    """An ExportTraceServiceRequest with one chat span of run ``bench-path``: the SDK's spans, encoded by
    the OTLP exporter's own encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "span-path"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("bench.span_path").start_as_current_span("chat model") as span:
        messages = [
            {"role": "user", "parts": [{"type": "text", "content": f"question {n}"}]} for n in range(number)
        ]
        span.set_attributes(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.conversation.id": "bench-path",
                "gen_ai.system_instructions": '[{"type": "text", "content": "You are terse."}]',
                "gen_ai.input.messages": __import__("json").dumps(messages),
                "gen_ai.usage.input_tokens": 1200 + number,
                "gen_ai.usage.cache_read.input_tokens": 1000,
                "gen_ai.usage.cache_creation.input_tokens": 10,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.response.finish_reasons": ["stop"],
            }
        )
    provider.shutdown()
    return encode_spans(memory.get_finished_spans()).SerializeToString()


class PathRecorder:
    """The sequence of ingest modules the interpreter is in, consecutive repeats collapsed."""

    def __init__(self) -> None:
        self.path: list[str] = []

    def _innermost(self, frame) -> str | None:
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name.startswith("ingest.") and not name.startswith("ingest.migrations"):
                return name
            frame = frame.f_back
        return None

    def __call__(self, frame, event, arg) -> None:
        if event == "call":
            module = self._innermost(frame)
        elif event == "return":
            module = self._innermost(frame.f_back)
        else:
            return
        if module is not None and (not self.path or self.path[-1] != module):
            self.path.append(module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", action="store_true", help="print the path, one module a line")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.environ["CTXVIEW_DATA_DIR"] = folder
        os.environ["CTXVIEW_ALLOWED_HOSTS"] = "testserver"
        for name in ("DATABASE_URL", "CELERY_BROKER_URL"):
            os.environ.pop(name, None)
        os.environ["DJANGO_SETTINGS_MODULE"] = "ctxview.settings"
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.core.management import call_command
        from django.test import Client

        from ingest.keys import create_key
        from ingest.models import Call, Project, Run

        call_command("migrate", verbosity=0)
        key = create_key(Project.objects.create(slug="bench", name="bench"))
        client = Client()

        def post(body: bytes, recorder: "PathRecorder | None" = None) -> None:
            sys.setprofile(recorder)
            try:
                answer = client.post(
                    "/v1/traces",
                    data=body,
                    content_type="application/x-protobuf",
                    headers={"authorization": f"Bearer {key}"},
                )
            finally:
                sys.setprofile(None)
            assert answer.status_code == 200, answer.content

        post(chat_span_request(1))
        body, recorder = chat_span_request(2), PathRecorder()
        post(body, recorder)
        run = Run.objects.get()
        assert Call.objects.filter(run=run).count() == 2 and run.analysed_seq == 2, (
            "the call was not analysed"
        )

    seen: set[str] = set()
    returns: Counter[str] = Counter()
    for module in recorder.path:
        if module in seen:
            returns[module] += 1
        seen.add(module)
    print(
        f"one span, receiver to analysed call: {len(seen)} ingest modules entered, "
        f"{len(recorder.path)} steps,"
    )
    print(f"{sum(returns.values())} returns to a module left before:")
    for module, times in returns.most_common():
        print(f"  {module.removeprefix('ingest.')}: {times}")
    if options.show:
        print("\n".join(recorder.path))


if __name__ == "__main__":
    main()
