"""A partial index on the spans that name a run (a session id, a conversation id...): only those.

A call that names no run takes the run a span above it names (ingest.agent_sessions.declared), so a batch
looks up, in the traces it touches, the spans that name one. Without the index that read every stored
span of those traces (and their attributes) on every batch: a cost that grew with the trace. The
predicate is the one ``declared`` queries with, key for key (ingest.semconv.RUN_KEYS). Built
concurrently, so an upgrade does not stop ingest; SQLite reads the trace's spans, and has no index here."""

from django.db import migrations

from ingest.semconv import RUN_KEYS

KEYS = ", ".join(f"'{key}'" for key in RUN_KEYS)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS span_named_runs ON ingest_span (project_id, trace_id)"
            f" WHERE attributes ?| ARRAY[{KEYS}]::text[]"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS span_named_runs")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("ingest", "0019_operation_details"),
    ]

    operations = [migrations.RunPython(create, drop)]
