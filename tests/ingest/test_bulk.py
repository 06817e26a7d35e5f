"""Writing many rows at once (ingest.bulk): what the ORM would have written, in fewer statements."""

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ingest import bulk
from ingest.bulk import update_rows
from ingest.models import Call, ItemList, Run
from tests import services


def stored_call(project, run, span_id: str) -> Call:
    return Call.objects.create(
        project=project,
        run=run,
        trace_id="t" * 32,
        span_id=span_id,
        start_ns=int(span_id, 16),
        end_ns=1,
        started_at=timezone.now(),
    )


def test_update_rows_writes_every_kind_of_field_in_one_statement(project):
    run, other = (Run.objects.create(project=project, key=key) for key in ("a", "b"))
    calls = [stored_call(project, run, f"{number:016x}") for number in range(1, 4)]
    lists = [ItemList.objects.create(project=project, entered=[{"hash": "h"}]) for _ in calls]
    values = [
        # seq/turn (integers), a JSON field, a packed JSON field, a foreign key, text, and nulls.
        {"seq": 1, "turn": 1, "notes": ["a", {"b": 'c"\\'}], "analysis": {"cache": {"x": 1}}, "run": other,
         "carried_fingerprint": "f'1", "item_list": lists[0], "window_total": 10},
        {"seq": 2, "turn": 1, "notes": [], "analysis": None, "run": run,
         "carried_fingerprint": "", "item_list": None, "window_total": None},
        {"seq": None, "turn": None, "notes": ["ü \u2028"], "analysis": {"buckets": {}}, "run": other,
         "carried_fingerprint": "x" * 32, "item_list": lists[2], "window_total": 2**40},
    ]  # fmt: skip
    for call, fields in zip(calls, values, strict=True):
        for name, value in fields.items():
            setattr(call, name, value)
    with CaptureQueriesContext(connection) as queries:
        update_rows(Call, calls, list(values[0]))
    if connection.vendor == "postgresql":  # elsewhere the ORM's bulk_update writes them
        assert len(queries) == 1
    for call, fields in zip(calls, values, strict=True):
        stored = Call.objects.get(id=call.id)
        assert {name: getattr(stored, name) for name in fields} == fields


def test_insert_rows_does_not_reuse_a_staging_table_of_other_columns(project):
    # Behind PgBouncer a server connection, and the temporary tables on it, outlives a release: a staging
    # table made before a migration added a column is found by the next release's transactions.
    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (the COPY staging tables are its own)")
    before = [field for field in Run._meta.concrete_fields if not field.primary_key][:-1]  # one column less
    columns = ", ".join(field.column for field in before)
    with transaction.atomic(), connection.cursor() as cursor:
        # The name this module gave it before it named the columns, and the name it gives those columns.
        for name in ("ingest_run_staging", bulk._staging_name("ingest_run", before)):
            cursor.execute(f"CREATE TEMPORARY TABLE {name} AS SELECT 0 AS ordinal, {columns} FROM ingest_run")
        inserted = bulk.insert_rows(
            Run, [{"project_id": project.id, "key": "k", "updated_at": timezone.now()}], returning="id"
        )
    assert Run.objects.get(id=inserted[0]).key == "k"
