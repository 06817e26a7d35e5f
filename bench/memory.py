"""Worker memory per batch: how much a batch task's process grows while processing one large batch.

    .venv/bin/python bench/memory.py                          # 2,000 spans of ~8 KB of messages
    .venv/bin/python bench/memory.py --spans 4000 --chars 16000

Stores one raw batch of chat spans (50 per conversation) in a throwaway PostgreSQL database and runs
``process_batch`` on it in this process, with the analyses in-process; prints the batch's decompressed
size and the growth of this process's peak RSS over its RSS before the task (what a worker needs on top
of its idle size for such a batch).
"""

import argparse
import json
import os
import random
import resource
import time
import zlib

from payloads import attribute, make_vocabulary, text
from servers import django_in_process


def build(spans: int, chars: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    rng = random.Random(1)
    vocabulary = make_vocabulary(rng)
    request = ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add().scope_spans.add()
    for index in range(spans):
        span = scope_spans.spans.add()
        span.trace_id = (index // 50 + 1).to_bytes(16, "big")
        span.span_id = (index + 1).to_bytes(8, "big")
        span.name = "chat gpt-4o"
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + index * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 1_000
        messages = [{"role": "user", "parts": [{"type": "text", "content": text(rng, vocabulary, chars)}]}]
        span.attributes.extend(
            [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.provider.name", "openai"),
                attribute("gen_ai.request.model", "gpt-4o"),
                attribute("gen_ai.conversation.id", f"conversation-{index // 50}"),
                attribute("gen_ai.input.messages", json.dumps(messages)),
                attribute("gen_ai.usage.input_tokens", 100),
            ]
        )
    return request.SerializeToString()


def rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--chars", type=int, default=8000, help="characters of message text per span")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    with django_in_process(args.database_url):
        from ingest import store, tokens
        from ingest.models import Call, Project, RawBatch
        from ingest.tasks import enqueue_analysis

        body = build(args.spans, args.chars)
        project = Project.objects.create(slug="memory", name="memory")
        batch = RawBatch.objects.create(
            project=project,
            signal="traces",
            body=zlib.compress(body, 1),
            content_type="protobuf",
            wire_bytes=len(body),
            item_count=args.spans,
        )
        size = len(body)
        del body
        tokens.count("warm up")
        before = rss_kib()
        if resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > before:
            # Building the batch peaked higher than the task may: measure the task in a fresh peak.
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
        started = time.perf_counter()
        assert store.process_batch(batch.id, then=enqueue_analysis) == "done"
        seconds = time.perf_counter() - started
        with open("/proc/self/status") as status:
            peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        assert Call.objects.count() == args.spans
        growth = (peak - before) * 1024
        print(
            f"batch: {args.spans} spans, {size / 2**20:.1f} MiB decompressed; processed in {seconds:.1f} s; "
            f"RSS {before / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB: "
            f"+{growth / 2**20:.0f} MiB = {growth / size:.1f}x the batch"
        )


if __name__ == "__main__":
    main()
