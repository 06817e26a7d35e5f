from django.db import migrations


def create_index(apps, schema_editor):
    # PostgreSQL only: a GIN index makes "which calls had this item/source/version/hash" a containment
    # lookup (items @> '[{"source": ...}]'). SQLite has no such index; embedded search scans instead.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS call_items_gin ON ingest_call USING gin (items jsonb_path_ops)"
        )


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS call_items_gin")


class Migration(migrations.Migration):
    dependencies = [("ingest", "0004_data_policy")]
    operations = [migrations.RunPython(create_index, drop_index)]
