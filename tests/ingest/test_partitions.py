"""Day partitions on PostgreSQL (ingest.partitions): how rows land, move and go, and the online conversion
of a database that holds rows while a writer goes on."""

import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from django.db import connection

from ingest import partitions
from ingest.models import RawBatch, Span
from tests import factories, services

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def postgresql(database_url):
    return database_url


def count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


def dated_request(day: datetime):
    """Three chat spans of one trace, started at noon of ``day``."""
    request = factories.trace_request(spans=3)
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.start_time_unix_nano += int(day.replace(hour=12).timestamp() * 1e9) - 1_700_000_000_000_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 500_000
    return request


def test_the_three_tables_are_partitioned_by_day_ahead_with_a_default():
    first = partitions.today() + timedelta(days=2)  # the migration's bound: the day after tomorrow
    for spec in partitions.TABLES:
        names = set(partitions.partitions(spec.table))
        assert partitions.is_partitioned(spec.table), spec.table
        assert f"{spec.table}_default" in names
        assert f"{spec.table}_before_{first:%Y%m%d}" in names
        ahead = range(partitions.AHEAD_DAYS + 1)
        days = {f"{spec.table}_p{first + timedelta(days=offset):%Y%m%d}" for offset in ahead}
        assert days <= names, sorted(days - names)


def test_a_redelivered_span_lands_once_in_the_partition_of_its_day():
    project, _ = factories.project_with_key("days")
    day = datetime.now(UTC) + timedelta(days=3)
    request = dated_request(day)
    factories.processed(project, request)
    factories.processed(project, request)  # the same spans again: a redelivery
    partition = f"ingest_span_p{day:%Y%m%d}"
    assert Span.objects.filter(project=project).count() == 3
    assert count(partition) == 3
    assert count("ingest_span_default") == 0


def test_a_span_beyond_the_created_days_waits_in_the_default_partition_until_its_day_is_created():
    project, _ = factories.project_with_key("far")
    far = datetime.now(UTC) + timedelta(days=60)
    request = dated_request(far)
    factories.processed(project, request)
    assert count("ingest_span_default") == 3

    created = partitions.ensure_partitions(now=far)
    assert f"ingest_span_p{far:%Y%m%d}" in created
    assert count("ingest_span_default") == 0
    assert count(f"ingest_span_p{far:%Y%m%d}") == 3
    factories.processed(project, request)  # redelivered after the move: still once
    assert Span.objects.filter(project=project).count() == 3
    assert partitions.ensure_partitions(now=far) == []  # twice creates nothing


def test_a_raw_batch_goes_to_the_partition_of_the_day_it_arrived():
    project, _ = factories.project_with_key("raw")
    factories.processed(project, factories.trace_request(spans=1))
    batch = RawBatch.objects.get(project=project)
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM ingest_rawbatch WHERE id = %s", [batch.id])
        (partition,) = cursor.fetchone()
    first = partitions.first_day(partitions.TABLES[2])
    expected = (
        f"ingest_rawbatch_before_{first:%Y%m%d}"
        if partitions.today() < first
        else f"ingest_rawbatch_p{partitions.today():%Y%m%d}"
    )
    assert partition == expected


# --- a database of its own: converted with rows in it, then expired -------------------------------


def manage(url: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=services.ROOT,
        env=os.environ | {"DATABASE_URL": url, "CELERY_BROKER_URL": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def scratch_database(database_url):
    base = database_url.rsplit("/", 1)[0]
    name = f"ctxtest_partitions_{os.getpid()}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    yield f"{base}/{name}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


ROWS = 60_000
SPAN_ROWS = """
INSERT INTO ingest_span (project_id, resource_id, batch_id, trace_id, span_id, parent_span_id, name, kind,
  start_time_unix_nano, end_time_unix_nano, status_code, status_message, scope_name, scope_version,
  attributes, events, links, received_at)
SELECT %(project)s, %(resource)s, NULL, md5(%(prefix)s || g::text), lpad(to_hex(g), 16, '0'), '', 'chat', 3,
  %(start)s::bigint + g, %(start)s::bigint + g + 1000, 0, '', 'tests', '',
  '{"gen_ai.operation.name": "chat"}', '[]', '[]', now()
FROM generate_series(%(first)s::bigint, %(last)s::bigint) g
"""


class Writer(threading.Thread):
    """Inserts spans one by one, each in its own transaction, until stopped; keeps what failed."""

    def __init__(self, url: str, project: int, resource: int):
        super().__init__(daemon=True)
        self.url, self.project, self.resource = url, project, resource
        self.written, self.errors, self.longest = 0, [], 0.0
        self.stopping = threading.Event()

    def run(self):
        start = int(datetime.now(UTC).timestamp() * 1e9)
        with psycopg.connect(self.url, autocommit=True) as writer:
            while not self.stopping.is_set():
                number = self.written + 1
                began = time.monotonic()
                try:
                    writer.execute(
                        SPAN_ROWS,
                        {"project": self.project, "resource": self.resource, "prefix": "w", "start": start,
                         "first": number, "last": number},
                    )  # fmt: skip
                    self.written += 1
                except psycopg.Error as error:
                    self.errors.append(str(error))
                self.longest = max(self.longest, time.monotonic() - began)
                time.sleep(0.002)


def test_a_database_with_rows_is_converted_online_and_retention_drops_whole_days(scratch_database):
    url = scratch_database
    manage(url, "migrate", "ingest", "0021", "--noinput", "-v0")
    ids = manage(
        url, "shell", "-c",
        "from ingest.models import Project, Resource, RawBatch;"
        "p = Project.objects.create(slug='s', name='s');"
        "r = Resource.objects.create(project=p, hash='h', attributes={});"
        "RawBatch.objects.create(project=p, signal='traces', body=b'', content_type='protobuf', wire_bytes=0,"
        " item_count=0); print(p.id, r.id)",
    )  # fmt: skip
    project, resource = map(int, ids.splitlines()[-1].split())
    old_start = int((datetime.now(UTC) - timedelta(days=40)).timestamp() * 1e9)
    with psycopg.connect(url, autocommit=True) as database:
        database.execute(
            SPAN_ROWS,
            {"project": project, "resource": resource, "prefix": "old", "start": old_start, "first": 1,
             "last": ROWS},
        )  # fmt: skip
        old_max_id = database.execute("SELECT max(id) FROM ingest_span").fetchone()[0]

    writer = Writer(url, project, resource)
    writer.start()
    time.sleep(0.3)
    output = manage(url, "migrate", "--noinput")
    time.sleep(0.3)
    writer.stopping.set()
    writer.join()
    print(f"converted {ROWS:,} spans while {writer.written} were written one by one; longest insert "
          f"{writer.longest * 1000:.0f} ms")  # fmt: skip

    assert writer.errors == [], writer.errors[:3]
    assert writer.written > 0
    with psycopg.connect(url, autocommit=True) as database:
        kinds = dict(database.execute(
            "SELECT relname, relkind FROM pg_class WHERE relname IN ('ingest_span', 'ingest_logrecord', "
            "'ingest_rawbatch')"
        ).fetchall())  # fmt: skip
        assert kinds == {"ingest_span": "p", "ingest_logrecord": "p", "ingest_rawbatch": "p"}, output
        stored, distinct_ids = database.execute(
            "SELECT count(*), count(DISTINCT id) FROM ingest_span"
        ).fetchone()
        assert stored == distinct_ids == ROWS + writer.written
        database.execute(
            SPAN_ROWS,
            {"project": project, "resource": resource, "prefix": "new", "start": old_start, "first": 1,
             "last": 1},
        )  # fmt: skip
        (new_id,) = database.execute(
            "SELECT max(id) FROM ingest_span WHERE trace_id = md5('new1')"
        ).fetchone()
        assert new_id > old_max_id  # the partitioned table's ids go on from the old table's
        # Spans are unique with their start: the same one again is refused, in its partition.
        with pytest.raises(psycopg.errors.UniqueViolation):
            database.execute(
                SPAN_ROWS,
                {"project": project, "resource": resource, "prefix": "old", "start": old_start, "first": 7,
                 "last": 7},
            )  # fmt: skip
    assert "partitioned already" in manage(url, "partitiontables")

    # Long after: every span partition has expired; the raw-batch one keeps its pending batch.
    later = (datetime.now(UTC) + timedelta(days=400)).isoformat()
    dropped = manage(
        url, "shell", "-c",
        "from datetime import datetime; from ingest import partitions;"
        "print(' '.join(partitions.drop_expired("
        f"{{'retention_days': 30, 'raw_retention_days': 3}}, now=datetime.fromisoformat('{later}'))))",
    ).splitlines()[-1].split()  # fmt: skip
    span_partitions = [name for name in dropped if name.startswith("ingest_span_")]
    assert any(name.startswith("ingest_span_before_") for name in span_partitions)
    assert not any(name.startswith("ingest_rawbatch_before_") for name in dropped)  # a batch is pending
    with psycopg.connect(url, autocommit=True) as database:
        assert database.execute("SELECT count(*) FROM ingest_span").fetchone()[0] == 0
        assert database.execute("SELECT count(*) FROM ingest_rawbatch").fetchone()[0] == 1
        left = {name for (name,) in database.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'ingest_span'::regclass"
        ).fetchall()}  # fmt: skip
    assert left == {"ingest_span_default"}
