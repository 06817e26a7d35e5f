"""Day partitions of the span, log-record and raw-batch tables on PostgreSQL (ingest.partitions).

The unique keys of spans and log records gain the time column each is partitioned by (part of what makes a
row unique already: a redelivered span has the same start). On PostgreSQL a table of fewer than
``partitions.CONVERT_IN_MIGRATION_ROWS`` rows is converted here, online; a larger one is left as it is, with
a notice, for ``manage.py partitiontables`` (the same conversion, run when the operator chooses). Not
reversed: going back leaves the tables partitioned, which the earlier code reads and writes the same.
"""

from django.db import migrations, models
from django.db.migrations.operations.base import Operation

from ingest import partitions

SPAN_UNIQUE = models.UniqueConstraint(
    fields=["project", "trace_id", "span_id", "start_time_unix_nano"], name="span_unique"
)
LOGRECORD_UNIQUE = models.UniqueConstraint(
    fields=["project", "record_hash", "observed_time_unix_nano"], name="logrecord_unique"
)


class NotOnPostgreSQL(Operation):
    """``operation`` as Django runs it, but on PostgreSQL only its state: there the conversion builds the
    wider keys online (a plain AddConstraint would lock the table while it builds a unique index)."""

    reduces_to_sql = False

    def __init__(self, operation):
        self.operation = operation

    def state_forwards(self, app_label, state):
        self.operation.state_forwards(app_label, state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            self.operation.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            self.operation.database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self):
        return f"{self.operation.describe()} (not on PostgreSQL)"


def convert_small_tables(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for spec in partitions.TABLES:
        if partitions.estimated_rows(spec.table) < partitions.CONVERT_IN_MIGRATION_ROWS:
            partitions.convert(spec)
        else:
            print(
                f"\n  {spec.table} holds about {partitions.estimated_rows(spec.table):,} rows: left as it is;"
                " run `manage.py partitiontables` to partition it by day online"
            )


class Migration(migrations.Migration):
    atomic = False  # indexes are built concurrently

    dependencies = [("ingest", "0021_continued_windows")]

    operations = [
        NotOnPostgreSQL(migrations.RemoveConstraint(model_name="span", name="span_unique")),
        NotOnPostgreSQL(migrations.AddConstraint(model_name="span", constraint=SPAN_UNIQUE)),
        NotOnPostgreSQL(migrations.RemoveConstraint(model_name="logrecord", name="logrecord_unique")),
        NotOnPostgreSQL(migrations.AddConstraint(model_name="logrecord", constraint=LOGRECORD_UNIQUE)),
        migrations.RunPython(convert_small_tables, migrations.RunPython.noop),
    ]
