"""Inserting many rows at once: COPY on PostgreSQL, the ORM's bulk_create elsewhere."""

import functools
import hashlib
import json

import orjson
from django.db import connection, models

BULK_SIZE = 500


def insert_rows(
    model: type[models.Model],
    rows: list[dict],
    *,
    on_conflict: str = "skip",
    returning: str = "",
    with_ids: bool = False,
):
    """Insert rows (field attname -> value) in their order, in one statement; returns the ``returning``
    column of the rows inserted (empty without it).

    ``on_conflict``: ``skip`` leaves a row whose unique key is taken (``ON CONFLICT DO NOTHING``),
    ``fail`` raises IntegrityError. SQLite has no ``returning`` here: every row is taken as inserted.
    ``with_ids``: the rows carry their primary keys (allocated from the sequence beforehand)."""
    if not rows:
        return []
    if connection.vendor != "postgresql":
        model.objects.bulk_create(
            [model(**row) for row in rows], ignore_conflicts=on_conflict == "skip", batch_size=BULK_SIZE
        )
        return [row[returning] for row in rows] if returning else []
    # PostgreSQL: COPY into a temporary table, then one INSERT ... SELECT. The ORM's multi-row INSERT
    # builds a model per row and quotes every value into the SQL text; COPY streams the values.
    fields = _fields(model, with_ids)
    table = model._meta.db_table
    staging = _staging_table(model, with_ids)
    columns = ", ".join(connection.ops.quote_name(field.column) for field in fields)
    # Each column: its row key, its default and how its value is written (None: as it is). Worked out
    # once per statement, not once per value: a batch's calls are ~40 columns by hundreds of rows.
    specs = [(field.attname, field.get_default(), _writer(field)) for field in fields]

    def values(row: dict) -> list:
        get = row.get
        return [
            get(name, default) if write is None else write(get(name, default))
            for name, default, write in specs
        ]

    with connection.cursor() as cursor, connection.wrap_database_errors:
        if on_conflict == "fail" and not returning:
            # Straight into the table, in the given order: a taken unique key fails the whole COPY.
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(values(row))
            return []
        # One per session (behind PgBouncer's transaction pooling, per server connection: the next client
        # transaction on it finds it, empty); ON COMMIT DELETE ROWS empties it at each commit without a
        # new file.
        cursor.execute(
            f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} ON COMMIT DELETE ROWS "
            f"AS SELECT 0 AS ordinal, {columns} FROM {table} WITH NO DATA"
        )
        with cursor.cursor.copy(f"COPY {staging} (ordinal, {columns}) FROM STDIN") as copy:
            for ordinal, row in enumerate(rows):
                copy.write_row([ordinal, *values(row)])
        # In the given order, as the ORM inserted them: ids break ties of equal times downstream.
        conflict = " ON CONFLICT DO NOTHING" if on_conflict == "skip" else ""
        returned = f" RETURNING {connection.ops.quote_name(returning)}" if returning else ""
        cursor.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {staging} ORDER BY ordinal"
            f"{conflict}{returned}"
        )
        inserted = [found[0] for found in cursor.fetchall()] if returning else []
        # Rows of an earlier batch in the same transaction (tests, a caller's atomic block) must go too.
        cursor.execute(f"DELETE FROM {staging}")
    return inserted


def _fields(model: type[models.Model], with_ids: bool) -> list[models.Field]:
    return [field for field in model._meta.concrete_fields if with_ids or not field.primary_key]


@functools.cache  # a quarter of a millisecond for a call's 50 columns: once per process
def _staging_table(model: type[models.Model], with_ids: bool) -> str:
    return _staging_name(model._meta.db_table, _fields(model, with_ids))


def _staging_name(table: str, fields: list[models.Field]) -> str:
    """The name of ``table``'s staging table for these columns, which says their names and types: a
    session's temporary table outlives a migration that adds a column where the session does (behind
    PgBouncer a server connection outlives the processes of a release), and a staging table of the old
    columns would fail the new COPY."""
    shape = ",".join(f"{field.column} {field.db_type(connection)}" for field in fields)
    return f"{table}_staging_{hashlib.blake2b(shape.encode(), digest_size=4).hexdigest()}"


def _writer(field: models.Field):
    """How ``insert_rows`` writes a column's value: packed, as JSON text, or as it is (None)."""
    if getattr(field, "packs_value", False):
        return field.get_prep_value
    if field.get_internal_type() == "JSONField":
        # JSON as text for the jsonb columns; None stays SQL NULL, as the ORM stores it.
        return _json_or_null
    return None


def _json_or_null(value) -> str | None:
    return None if value is None else _json(value)


def _json(value) -> str:
    """JSON text for a jsonb column. orjson is ~7x faster than json here (PostgreSQL parses it again,
    so only the values matter); json takes what orjson refuses (lone surrogates, ints over 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


def update_rows(model: type[models.Model], objects: list[models.Model], fields: list[str]) -> None:
    """Save ``fields`` of these (stored) objects, in one statement on PostgreSQL.

    The ORM's bulk_update builds a CASE WHEN per field and row: 60% of re-analysing a run went there.
    Here each field's values go as one array parameter, joined to the rows by id (UPDATE ... FROM unnest)."""
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_update(objects, fields, batch_size=BULK_SIZE)
        return
    meta = model._meta
    columns = [meta.get_field(name) for name in fields]
    arrays, assignments, arguments = [], [], []
    for number, field in enumerate(columns):
        values = [getattr(obj, field.attname) for obj in objects]
        if getattr(field, "packs_value", False):
            values, kind = [field.get_prep_value(value) for value in values], "bytea"
        elif field.get_internal_type() == "JSONField":  # as text: an array of JSON text, cast to jsonb
            values, kind = [None if value is None else _json(value) for value in values], "text"
        else:
            values = [field.get_db_prep_save(value, connection) for value in values]
            kind = field.rel_db_type(connection) if field.is_relation else field.db_type(connection)
        arrays.append(f"%s::{kind}[]")
        cast = "::jsonb" if field.get_internal_type() == "JSONField" else ""
        assignments.append(f"{connection.ops.quote_name(field.column)} = v.f{number}{cast}")
        arguments.append(values)
    names = ", ".join(f"f{number}" for number in range(len(columns)))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {meta.db_table} AS t SET {', '.join(assignments)}"
            f" FROM unnest(%s::bigint[], {', '.join(arrays)}) AS v(id, {names})"
            f" WHERE t.{connection.ops.quote_name(meta.pk.column)} = v.id",
            [[obj.pk for obj in objects], *arguments],
        )
