"""CPU per span of the batch task and the analyses, in one process on PostgreSQL, with what-ifs.

    .venv/bin/python bench/pipeline.py [--batches 10] [--variant baseline]   # one variant
    .venv/bin/python bench/pipeline.py --all                                 # every variant, a table

Stores batches of the load (bench/payloads.py) as raw batches and runs ``process_batch`` on each with
tasks in-process, so each batch's analyses run too; measures this process's CPU time and that of its
PostgreSQL backend. The variants change one thing each, to put a number on a proposal:

- baseline: the code as it is.
- orm-spans: spans inserted by the ORM's bulk_create, as before ingest.store used COPY.
- server-binding: psycopg binds parameters on the server instead of quoting them into the SQL text
  (Django's ``OPTIONS: {"server_side_binding": True}``).
- no-tokenizer: token counts estimated as characters / 4 instead of by the tokenizer (an upper bound on
  what counting tokens elsewhere, or later, would save).
- cold-cache: the in-process token cache emptied before each batch, as if each batch went to a worker
  that never saw the run before (another worker process, or one just restarted).

``--shape conversations``: the load of issue 19 (bench/payloads.py ``build_conversations``) instead;
``--shape fresh``: the same with every call's text new (issue 37). ``--profile FILE``: where the
batches' Python time goes (cProfile, the top 30 functions by their own time).
"""

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
import zlib
from pathlib import Path

from payloads import BATCH_SIZE, build_batches, build_conversations, conversation_spans
from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
VARIANTS = ("baseline", "orm-spans", "server-binding", "no-tokenizer", "cold-cache")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _empty_token_cache() -> None:
    import importlib

    for name in ("ingest.contents", "ingest.calls"):  # where the cache lives now, and before
        try:
            importlib.import_module(name)._token_cache.clear()
        except (ImportError, AttributeError):
            pass


def run_variant(
    variant: str, batches: int, database_url: str, shape: str = "chats", profile: str | None = None
) -> dict:
    with django_in_process(database_url):
        from django.db import connection

        from ingest import raw_rows, store, tokens
        from ingest.models import Call, Project, RawBatch, Run, Span
        from ingest.tasks import enqueue_analysis

        if variant == "server-binding":
            connection.settings_dict["OPTIONS"]["server_side_binding"] = True
            connection.close()
        elif variant == "orm-spans":

            def insert_rows(model, rows):
                model.objects.bulk_create(
                    [model(**row) for row in rows], ignore_conflicts=True, batch_size=500
                )

            raw_rows.insert_rows = insert_rows  # the span rows (ingest/raw_rows.py)
        elif variant == "no-tokenizer":
            tokens.count_all = lambda texts: [len(text) // 4 for text in texts]
        counted = [0]  # texts given to the tokenizer
        count_all = tokens.count_all

        def counting(texts) -> list[int]:
            counted[0] += len(texts)
            return count_all(texts)

        tokens.count_all = counting

        project = Project.objects.create(slug="bench", name="bench")
        if shape in ("conversations", "fresh"):
            spans, calls = conversation_spans(BATCH_SIZE * batches)
            bodies = build_conversations(BATCH_SIZE * batches, seed=5, fresh=shape == "fresh")
        else:
            spans = calls = BATCH_SIZE * batches
            bodies = build_batches(spans, seed=5)
        batch_ids = [
            RawBatch.objects.create(
                project=project,
                signal="traces",
                body=zlib.compress(body, 1),
                content_type="protobuf",
                wire_bytes=len(body),
                item_count=512,
            ).id
            for body in bodies
        ]
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        backend_before, cpu_before, wall_before = (
            backend_cpu(backend),
            time.process_time(),
            time.perf_counter(),
        )
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        for batch_id in batch_ids:
            if variant == "cold-cache":
                _empty_token_cache()
            assert store.process_batch(batch_id, then=enqueue_analysis) == "done"
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
        cpu = time.process_time() - cpu_before
        wall = time.perf_counter() - wall_before
        database = backend_cpu(backend) - backend_before
        assert Span.objects.count() == spans and Call.objects.count() == calls
        assert not [run for run in Run.objects.all() if run.analysed_seq != run.call_count]
        return {
            "variant": variant,
            "shape": shape,
            "spans": spans,
            "texts_tokenized": counted[0],
            "python_ms_per_span": cpu * 1000 / spans,
            "postgres_ms_per_span": database * 1000 / spans,
            "wall_ms_per_span": wall * 1000 / spans,
            "load": os.getloadavg()[0],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--variant", choices=VARIANTS, default="baseline")
    parser.add_argument("--all", action="store_true", help="every variant, each in a process of its own")
    parser.add_argument("--shape", choices=["chats", "conversations", "fresh"], default="chats")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the batches into FILE; print its top 30")
    args = parser.parse_args()
    if not args.all:
        result = run_variant(args.variant, args.batches, args.database_url, args.shape, args.profile)
        print(json.dumps(result) if args.json else result)
        if args.profile:  # the figures above include the profiler's own cost
            pstats.Stats(args.profile).sort_stats("tottime").print_stats(30)
        return
    results = []
    for variant in VARIANTS:
        command = [sys.executable, __file__, "--variant", variant, "--batches", str(args.batches), "--json"]
        command += ["--shape", args.shape, "--database-url", args.database_url]
        done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    base = results[0]["python_ms_per_span"] + results[0]["postgres_ms_per_span"]
    header = ("variant", "Python ms/span", "PostgreSQL ms/span", "total", "vs baseline", "load")
    print("".join(f"{cell:>{width}}" if width > 0 else f"{cell:<{-width}}"
                  for cell, width in zip(header, (-16, 16, 20, 8, 13, 6), strict=True)))  # fmt: skip
    for result in results:
        total = result["python_ms_per_span"] + result["postgres_ms_per_span"]
        print(
            f"{result['variant']:<16}{result['python_ms_per_span']:>16.2f}{result['postgres_ms_per_span']:>20.2f}"
            f"{total:>8.2f}{(total - base) / base:>+13.0%}{result['load']:>6.1f}"
        )


if __name__ == "__main__":
    main()
