"""Day partitions of the span, log-record and raw-batch tables, on PostgreSQL.

Each table is partitioned by range of one time column, a partition per UTC day:

- spans by ``start_time_unix_nano`` and log records by ``observed_time_unix_nano`` (both are part of what
  makes a row unique, so a redelivered span or record goes to the partition it went to the first time and
  is refused there as a duplicate); raw batches by ``received_at``;
- ``<table>_before_<day>`` holds every row older than the first day partition (the table as it was before
  it was partitioned, attached whole); ``<table>_p<day>`` one day; ``<table>_default`` whatever no other
  partition takes (a clock years off, a day not created yet). A row is never refused for want of a
  partition.

Beat creates the partitions ``AHEAD_DAYS`` ahead (``ensure_partitions``); retention detaches and drops a
partition once every row in it is older than the longest retention of any project (``drop_expired``), which
costs a catalogue change instead of a delete of every row (bench/partitions.py measures both).

Converting a table that is not partitioned yet (``convert``) never holds a lock longer than a catalogue
change: the unique indexes that must gain the partition key are built concurrently, a check constraint
bounding the time column is validated while writes go on, then one short transaction renames the table,
creates the partitioned table under the old name with the same columns, constraints and indexes, and
attaches the old table as its first partition (the validated check spares PostgreSQL a scan). The
migration converts tables below ``CONVERT_IN_MIGRATION_ROWS``; ``manage.py partitiontables`` converts the
rest. On SQLite nothing here does anything: the tables stay plain and retention deletes rows.
"""

import logging
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction

logger = logging.getLogger(__name__)

# Every partition costs each query that cannot prune by day (a trace's spans) a little planning and an
# index probe: create few ahead, hourly; the default partition holds whatever comes before its day exists.
AHEAD_DAYS = 2
CONVERT_IN_MIGRATION_ROWS = 1_000_000
# A conversion's catalogue changes wait at most this long for the table's lock, then give up (and are
# tried again): never a queue of writers stuck behind it.
LOCK_TIMEOUT = "5s"


@dataclass(frozen=True)
class Partitioned:
    table: str
    key: str  # the column partitioned by
    nanoseconds: bool  # the key is a Unix time in ns (else a timestamptz)
    retention: str  # the Project field that says how long its rows are kept
    keeps_pending: bool = False  # a partition holding a pending row (a batch not processed yet) stays

    def bound(self, day: date) -> str:
        """The key's value at the start of ``day`` (UTC), as SQL."""
        start = datetime.combine(day, time(), tzinfo=UTC)
        return str(int(start.timestamp()) * 10**9) if self.nanoseconds else f"'{start.isoformat()}'"


TABLES = (
    Partitioned("ingest_span", "start_time_unix_nano", True, "retention_days"),
    Partitioned("ingest_logrecord", "observed_time_unix_nano", True, "retention_days"),
    Partitioned("ingest_rawbatch", "received_at", False, "raw_retention_days", keeps_pending=True),
)
DAY = re.compile(r"_(p|before_)(\d{8})$")


def available() -> bool:
    return connection.vendor == "postgresql"


def is_partitioned(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [table])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def partitions(table: str) -> list[str]:
    """The names of ``table``'s partitions."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY c.relname",
            [table],
        )
        return [name for (name,) in cursor.fetchall()]


def day_of(name: str) -> tuple[str, date] | None:
    """("p", day) for a day partition, ("before_", first day after it) for the old table, else None."""
    found = DAY.search(name)
    return (found[1], datetime.strptime(found[2], "%Y%m%d").date()) if found else None


def today(now: datetime | None = None) -> date:
    return (now or datetime.now(UTC)).astimezone(UTC).date()


# --- creating partitions ahead -------------------------------------------------------------------


def first_day(spec: Partitioned) -> date:
    """The first day a day partition may hold: the one the old table's bound ends on."""
    bounds = [found[1] for found in map(day_of, partitions(spec.table)) if found and found[0] == "before_"]
    return max(bounds) if bounds else date.min


def create_day(spec: Partitioned, day: date) -> None:
    """Create the partition of ``day``, moving into it the rows the default partition holds for it
    (otherwise PostgreSQL refuses to create it)."""
    name, low, high = f"{spec.table}_p{day:%Y%m%d}", spec.bound(day), spec.bound(day + timedelta(days=1))
    in_range = f"{spec.key} >= {low} AND {spec.key} < {high}"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"CREATE TEMPORARY TABLE moved (LIKE {spec.table}) ON COMMIT DROP")
        cursor.execute(
            f"WITH gone AS (DELETE FROM {spec.table}_default WHERE {in_range} RETURNING *) "
            "INSERT INTO moved SELECT * FROM gone"
        )
        cursor.execute(f"CREATE TABLE {name} PARTITION OF {spec.table} FOR VALUES FROM ({low}) TO ({high})")
        cursor.execute(f"INSERT INTO {spec.table} SELECT * FROM moved")
        if cursor.rowcount:
            logger.info("moved %s rows from %s_default into %s", cursor.rowcount, spec.table, name)


def ensure_partitions(now: datetime | None = None) -> list[str]:
    """Create each partitioned table's day partitions from today to AHEAD_DAYS ahead; returns the new
    ones. Running it twice creates nothing more."""
    if not available():
        return []
    created = []
    for spec in TABLES:
        if not is_partitioned(spec.table):
            continue
        have = set(partitions(spec.table))
        start = max(today(now), first_day(spec))
        for offset in range(AHEAD_DAYS + 1):
            day = start + timedelta(days=offset)
            if f"{spec.table}_p{day:%Y%m%d}" not in have:
                create_day(spec, day)
                created.append(f"{spec.table}_p{day:%Y%m%d}")
    return created


# --- dropping expired partitions -----------------------------------------------------------------


def drop_expired(longest_retention: dict[str, int], now: datetime | None = None) -> list[str]:
    """Detach and drop every partition whose rows are all older than the longest retention of any project
    (``longest_retention``: Project field → days); a raw-batch partition that holds a pending batch is
    kept (it holds data not processed yet). Returns the dropped partitions."""
    if not available():
        return []
    dropped = []
    for spec in TABLES:
        if spec.retention not in longest_retention or not is_partitioned(spec.table):
            continue
        cutoff = today(now) - timedelta(days=longest_retention[spec.retention])
        for name in partitions(spec.table):
            found = day_of(name)
            if found is None:
                continue
            ends = found[1] + timedelta(days=1) if found[0] == "p" else found[1]
            if ends <= cutoff and not holds_pending(spec, name):
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                    cursor.execute(f"ALTER TABLE {spec.table} DETACH PARTITION {name}")
                    cursor.execute(f"DROP TABLE {name}")
                dropped.append(name)
    if dropped:
        logger.info("retention dropped the partitions %s", ", ".join(dropped))
    return dropped


def holds_pending(spec: Partitioned, name: str) -> bool:
    if not spec.keeps_pending:
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {name} WHERE status = 'pending')")
        return cursor.fetchone()[0]


# --- converting a plain table --------------------------------------------------------------------


def estimated_rows(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)", [table]
        )
        return cursor.fetchone()[0]


def convert(spec: Partitioned, now: datetime | None = None) -> bool:
    """Make ``spec.table`` partitioned, keeping every row and id (module docstring). Returns False when it
    already was. Runs outside a transaction (indexes are built concurrently); safe to run again after an
    interruption."""
    if is_partitioned(spec.table):
        return False
    assert connection.get_autocommit(), "convert() builds indexes concurrently: call it outside a transaction"
    bound_day = today(now) + timedelta(days=2)  # a row dated further ahead waits (its task retries)
    legacy = f"{spec.table}_before_{bound_day:%Y%m%d}"
    keyed = prepare_unique_indexes(spec)
    check = f"{spec.table}_before_check"
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {spec.table} DROP CONSTRAINT IF EXISTS {check}")
        cursor.execute(
            f"ALTER TABLE {spec.table} ADD CONSTRAINT {check} "
            f"CHECK ({spec.key} < {spec.bound(bound_day)}) NOT VALID"
        )
        cursor.execute(f"ALTER TABLE {spec.table} VALIDATE CONSTRAINT {check}")  # reads, writes go on
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        cursor.execute(f"LOCK TABLE {spec.table} IN ACCESS EXCLUSIVE MODE")
        swap(cursor, spec, legacy, keyed, bound_day, check)
    ensure_partitions(now)
    return True


def unique_constraints(table: str) -> list[tuple[str, str, list[str]]]:
    """(name, "p" or "u", columns) of each primary key and unique constraint of ``table``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.conname, c.contype, array_agg(a.attname ORDER BY k.n) FROM pg_constraint c "
            "CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum "
            "WHERE c.conrelid = to_regclass(%s) AND c.contype IN ('p', 'u') GROUP BY c.conname, c.contype",
            [table],
        )
        return [(name, kind, list(columns)) for name, kind, columns in cursor.fetchall()]


def prepare_unique_indexes(spec: Partitioned) -> dict[str, str]:
    """Build, concurrently, a unique index with the partition key for each unique constraint that lacks
    it; returns constraint name → that index (an index left invalid by an interrupted build is rebuilt)."""
    keyed = {}
    for name, _, columns in unique_constraints(spec.table):
        if spec.key in columns:
            continue
        index = f"{spec.table}_{name}_keyed"[:63]
        with connection.cursor() as cursor:
            cursor.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index])
            row = cursor.fetchone()
            if row is not None and not row[0]:
                cursor.execute(f"DROP INDEX CONCURRENTLY {index}")
            cursor.execute(
                f"CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS {index} "
                f"ON {spec.table} ({', '.join([*columns, spec.key])})"
            )
        keyed[name] = index
    return keyed


def swap(cursor, spec: Partitioned, legacy: str, keyed: dict[str, str], bound_day: date, check: str) -> None:
    """The short transaction of a conversion: the old table becomes the first partition of a new
    partitioned table that takes its name, columns, constraints, indexes and id sequence."""
    table = spec.table
    cursor.execute(
        "SELECT c.conname, c.contype, pg_get_constraintdef(c.oid) FROM pg_constraint c "
        "WHERE c.conrelid = to_regclass(%s) AND c.contype IN ('c', 'f') AND c.conname <> %s",
        [table, check],
    )
    checks_and_keys = cursor.fetchall()
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = to_regclass(%s) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) AND i.relname <> ALL(%s)",
        [table, list(keyed.values())],
    )
    plain_indexes = cursor.fetchall()
    uniques = unique_constraints(table)
    cursor.execute(f"ALTER TABLE {table} RENAME TO {legacy}")
    # Index names are the schema's: the old table's make way for the new table's, which keep Django's.
    for name, kind, _ in uniques:
        old = f"{name}_old"[:63]
        if name in keyed:
            cursor.execute(f"ALTER TABLE {legacy} DROP CONSTRAINT {name}")
            cursor.execute(
                f"ALTER TABLE {legacy} ADD CONSTRAINT {old} "
                f"{'PRIMARY KEY' if kind == 'p' else 'UNIQUE'} USING INDEX {keyed[name]}"
            )
        else:
            cursor.execute(f"ALTER TABLE {legacy} RENAME CONSTRAINT {name} TO {old}")
    for name, _ in plain_indexes:
        cursor.execute(f"ALTER INDEX {name} RENAME TO {f'{name}_old'[:63]}")
    cursor.execute(
        f"CREATE TABLE {table} (LIKE {legacy} INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING STORAGE) "
        f"PARTITION BY RANGE ({spec.key})"
    )
    for name, kind, columns in uniques:
        keys = columns if spec.key in columns else [*columns, spec.key]
        cursor.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {name} "
            f"{'PRIMARY KEY' if kind == 'p' else 'UNIQUE'} ({', '.join(keys)})"
        )
    for name, _, definition in checks_and_keys:
        cursor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    bound = spec.bound(bound_day)
    cursor.execute(f"ALTER TABLE {table} ATTACH PARTITION {legacy} FOR VALUES FROM (MINVALUE) TO ({bound})")
    for _, definition in plain_indexes:  # as Django made it, on the old name: attaches the old table's
        cursor.execute(definition)
    cursor.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
    # The new table's id sequence goes on from the old one's, so ids stay unique across partitions.
    cursor.execute(
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
        f"greatest((SELECT max(id) FROM {legacy}), 0) + 1, false)"
    )
