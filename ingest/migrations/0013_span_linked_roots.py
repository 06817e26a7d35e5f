"""A partial GIN index on the root spans that link to another trace (a child agent's first span).

Batches look up the traces that link into theirs by containment (ingest.agent_sessions); without it
that scanned every span of the project. Built concurrently, so an upgrade does not stop ingest while
it reads the spans table; SQLite looks them up by their text instead, and has no index here."""

from django.db import migrations


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS span_linked_roots ON ingest_span"
            " USING gin (links jsonb_path_ops) WHERE parent_span_id = '' AND links <> '[]'::jsonb"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX CONCURRENTLY IF EXISTS span_linked_roots")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("ingest", "0012_composite_indexes_cover_foreign_keys"),
    ]

    operations = [migrations.RunPython(create, drop)]
