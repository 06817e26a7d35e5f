"""Span insertion on PostgreSQL: the ORM's bulk_create against ingest.bulk.insert_rows (COPY).

    .venv/bin/python bench/insert.py [--batches 12] [--json]

Creates a throwaway database, decodes batches of the load (512 ~4 KB chat spans each), moves their
content out as the batch task does, then inserts each batch's span rows both ways, alternating, each
in its own transaction, and again as duplicates (every row a conflict). Prints the median per batch.
"""

import argparse
import json
import statistics
import sys
import time
import zlib
from pathlib import Path

from payloads import build_batches
from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with django_in_process(args.database_url):
        from django.db import transaction
        from django.utils import timezone

        from ingest import calls, otlp
        from ingest.bulk import insert_rows
        from ingest.call_rows import Batch
        from ingest.models import Project, RawBatch, Resource, Span

        project = Project.objects.create(slug="bench", name="bench")
        resource = Resource.objects.create(project=project, hash="r", attributes={})
        now = timezone.now()

        def rows_of(body: bytes) -> list[dict]:
            decoded = list(
                otlp.spans(otlp.load(RawBatch.Signal.TRACES, zlib.decompress(zlib.compress(body))))
            )
            calls.interpret_spans(Batch(project.id), decoded)  # moves the calls' content out of the rows
            common = {
                "project_id": project.id,
                "batch_id": None,
                "received_at": now,
                "resource_id": resource.id,
            }
            return [{**common, **row} for _, row in decoded]

        def orm(rows: list[dict]) -> None:
            Span.objects.bulk_create([Span(**row) for row in rows], ignore_conflicts=True, batch_size=500)

        ways = {"ORM bulk_create": orm, "COPY (insert_rows)": lambda rows: insert_rows(Span, rows)}
        times: dict[str, list[float]] = {label: [] for label in ways}
        again: dict[str, list[float]] = {label: [] for label in ways}
        labels = list(ways)
        for number, body in enumerate(build_batches(512 * args.batches * len(ways), seed=3)):
            rows = rows_of(body)
            label = labels[number % len(labels)]  # alternating, so a busy moment hurts both alike
            for store in (times, again):  # new rows, then the same rows as conflicts
                started = time.perf_counter()
                with transaction.atomic():
                    ways[label](rows)
                store[label].append(time.perf_counter() - started)
        assert Span.objects.count() == 512 * args.batches * len(ways)
        result = {
            label: {
                "new_ms": statistics.median(times[label]) * 1000,
                "duplicate_ms": statistics.median(again[label]) * 1000,
                "spans": 512,
            }
            for label in ways
        }
        if args.json:
            print(json.dumps(result))
            return
        print(f"median over {args.batches} batches of 512 spans each, PostgreSQL:")
        for label, figures in result.items():
            print(
                f"{label:<20} {figures['new_ms']:7.1f} ms new "
                f"({figures['new_ms'] / 512 * 1000:.0f} µs/span), "
                f"{figures['duplicate_ms']:7.1f} ms all duplicates"
            )


if __name__ == "__main__":
    main()
