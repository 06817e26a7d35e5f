"""Stored bytes per call vs raw OTLP bytes for one long run whose every call resends its history.

    .venv/bin/python bench/storage.py [--calls 200] [--database-url postgres://postgres@127.0.0.1:5432/postgres]

Creates a throwaway PostgreSQL database, sends the run through the real receiver (in-process, tasks
eager), and prints the raw bytes received and the bytes each table holds (PostgreSQL's own sizes,
indexes and TOAST included).
"""

import argparse
import json
import sys
import time
from pathlib import Path

from payloads import build_run
from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TABLES = {
    "spans": "ingest_span",
    "calls": "ingest_call",
    "item lists": "ingest_itemlist",
    "content": "ingest_content",
    "runs": "ingest_run",
    "resources": "ingest_resource",
    "raw batches": "ingest_rawbatch",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    with django_in_process(args.database_url):
        from django.db import connection
        from django.db.models import Sum
        from django.db.models.functions import Length
        from django.test import Client

        from ingest.keys import create_key
        from ingest.models import Call, Project, RawBatch
        from ingest.retention import compact_raw_batches

        key = create_key(Project.objects.create(slug="bench", name="bench"))
        requests = build_run(args.calls)
        client = Client(HTTP_HOST="localhost")
        started = time.perf_counter()
        for body in requests:
            response = client.post(
                "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
            )
            assert response.status_code == 200, response.content
        elapsed = time.perf_counter() - started
        assert Call.objects.count() == args.calls
        connection.cursor().execute("VACUUM ANALYZE")
        with connection.cursor() as cursor:
            sizes = {}
            for label, table in TABLES.items():
                cursor.execute("SELECT pg_total_relation_size(%s)", [table])
                sizes[label] = cursor.fetchone()[0]
        raw = sum(len(body) for body in requests)
        stored = sum(size for label, size in sizes.items() if label != "raw batches")
        # What the hourly retention does to processed batches: their bodies recompressed harder.
        bodies = RawBatch.objects.aggregate(total=Sum(Length("body")))["total"]
        compact_raw_batches(Project.objects.get(slug="bench"))
        compacted = RawBatch.objects.aggregate(total=Sum(Length("body")))["total"]
        if args.json:
            figures = {"calls": args.calls, "raw_bytes": raw, "stored_bytes": stored, "tables": sizes}
            figures |= {"raw_batch_bodies": bodies, "raw_batch_bodies_compacted": compacted}
            print(json.dumps(figures | {"seconds": elapsed}))
            return
        print(
            f"run of {args.calls} calls, {RawBatch.objects.count()} requests, ingested in {elapsed:.1f} s "
            f"({args.calls / elapsed:.0f} calls/s, in-process, PostgreSQL)"
        )
        print(f"{'':24}{'bytes':>14}{'per call':>12}")
        print(f"{'raw OTLP received':24}{raw:>14,}{raw // args.calls:>12,}")
        for label, size in sizes.items():
            print(f"{label:24}{size:>14,}{size // args.calls:>12,}")
        print(f"{'stored (without raw)':24}{stored:>14,}{stored // args.calls:>12,}")
        print(f"stored / raw = {stored / raw:.3f}")
        print(
            f"raw batch bodies {bodies:,} B ({bodies // args.calls:,} per call); recompressed once processed "
            f"(retention): {compacted:,} B ({compacted // args.calls:,} per call)"
        )


if __name__ == "__main__":
    main()
