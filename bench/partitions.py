"""Retention of one day of spans on PostgreSQL: dropping its partition against deleting its rows (issue 38).

    .venv/bin/python bench/partitions.py                  # a day holding 1,000,000 spans
    .venv/bin/python bench/partitions.py --spans 200000

In a throwaway database (migrated, so the span table is partitioned by day: ingest.partitions), one day's
partition is filled with ``--spans`` spans of ~1 KB each (attributes as an instrumentation sends them),
checkpointed, then emptied twice, filled again between:

- **delete**: ``DELETE`` of the day's rows, as retention does on a plain table, then the ``VACUUM`` that
  gives their space back (both are the cost: without the vacuum the table only grows);
- **drop**: ``partitions.drop_expired`` for a retention that has passed that day (detach, drop; the
  partitions before it go too, empty).

For each: wall time and the WAL written (``pg_current_wal_lsn`` before and after; other writers on the
same server add to it, so run it on a quiet one).
"""

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DAY_NS = 86_400 * 10**9

FILL = """
INSERT INTO ingest_span (project_id, resource_id, trace_id, span_id, parent_span_id, name, kind,
  start_time_unix_nano, end_time_unix_nano, status_code, status_message, scope_name, scope_version,
  attributes, events, links, received_at)
SELECT %(project)s, %(resource)s, md5((g / 60)::text), lpad(to_hex(g), 16, '0'),
  lpad(to_hex(g - g %% 60), 16, '0'),
  'chat gpt-4o', 3, %(start)s::bigint + g * 80000, %(start)s::bigint + g * 80000 + 900000000, 0, '',
  'openinference.instrumentation.openai', '0.1.30',
  jsonb_build_object('gen_ai.operation.name', 'chat', 'gen_ai.request.model', 'gpt-4o',
    'gen_ai.usage.input_tokens', 1000 + g %% 5000, 'gen_ai.usage.output_tokens', g %% 700,
    'llm.input_messages.0.message.content', repeat(md5(g::text), 20)),
  '[]', '[]', now()
FROM generate_series(1, %(spans)s::bigint) g
"""


def wal_and_time(database, work) -> tuple[float, int]:
    """Seconds and WAL bytes of ``work()``."""
    before = database.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    wal = database.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint", [before]).fetchone()[0]
    return seconds, wal


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    options = parser.parse_args()
    name = f"ctxbench_partitions_{os.getpid()}"
    with psycopg.connect(f"{options.server}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    url = f"{options.server}/{name}"
    try:
        run(url, options.spans)
    finally:
        with psycopg.connect(f"{options.server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def run(url: str, spans: int) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxview.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    from ingest import partitions
    from ingest.models import Project, Resource

    call_command("migrate", "--noinput", verbosity=0)
    project = Project.objects.create(slug="bench", name="bench")
    resource = Resource.objects.create(project=project, hash="h", attributes={})
    day = datetime.now(UTC).date() + timedelta(days=4)  # a day partition the migration made
    start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 10**9
    partition = f"ingest_span_p{day:%Y%m%d}"
    fill = {"project": project.id, "resource": resource.id, "start": start, "spans": spans}
    in_day = "start_time_unix_nano >= %s AND start_time_unix_nano < %s"
    with psycopg.connect(url, autocommit=True) as database:

        def filled() -> str:
            database.execute(FILL, fill)
            database.execute(f"VACUUM ANALYZE {partition}")
            database.execute("CHECKPOINT")
            return database.execute(
                f"SELECT pg_size_pretty(pg_total_relation_size('{partition}'))"
            ).fetchone()[0]

        size = filled()
        delete = wal_and_time(
            database,
            lambda: database.execute(f"DELETE FROM ingest_span WHERE {in_day}", [start, start + DAY_NS]),
        )
        vacuum = wal_and_time(database, lambda: database.execute(f"VACUUM {partition}"))
        filled()
        # A retention that has passed the day: every partition up to it goes (the others are empty).
        drop = wal_and_time(
            database,
            lambda: partitions.drop_expired({"retention_days": 1}, now=datetime.now(UTC) + timedelta(days=6)),
        )
        left = database.execute("SELECT count(*) FROM ingest_span").fetchone()[0]
    assert left == 0, f"{left} spans left after the drop"
    print(f"retention of one day of {spans:,} spans ({size} with its indexes), PostgreSQL:")
    print(f"  delete the rows      {delete[0]:8.3f} s  {delete[1] / 2**20:9.2f} MiB of WAL")
    print(f"  then vacuum          {vacuum[0]:8.3f} s  {vacuum[1] / 2**20:9.2f} MiB of WAL")
    print(f"  drop the partitions  {drop[0]:8.3f} s  {drop[1] / 2**20:9.2f} MiB of WAL")


if __name__ == "__main__":
    main()
