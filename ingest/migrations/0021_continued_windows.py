"""What rebuilding a continued request's window needs (issue 33, ingest.continuations): the response a call
continues, the response its window lacks, its answer as items; and two partial indexes, on the calls by
response id (a request finds the call that answered the response it continues) and on the calls waiting
for a response (rebuilt when its call arrives). Built concurrently on PostgreSQL, so an upgrade does not
stop ingest."""

from django.db import migrations, models

INDEXES = (
    models.Index(
        condition=models.Q(("response_id", ""), _negated=True),
        fields=["project", "response_id"],
        name="call_response",
    ),
    models.Index(
        condition=models.Q(("window_gap", ""), _negated=True),
        fields=["project", "window_gap"],
        name="call_window_gap",
    ),
)


def create(apps, schema_editor):
    model = apps.get_model("ingest", "Call")
    for index in INDEXES:
        if schema_editor.connection.vendor == "postgresql":
            sql = str(index.create_sql(model, schema_editor, concurrently=True))
            schema_editor.execute(sql.replace("CREATE INDEX CONCURRENTLY", "CREATE INDEX CONCURRENTLY IF NOT EXISTS"))
        else:
            schema_editor.add_index(model, index)


def drop(apps, schema_editor):
    model = apps.get_model("ingest", "Call")
    for index in INDEXES:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index.name}")
        else:
            schema_editor.remove_index(model, index)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("ingest", "0020_span_named_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="call",
            name="continues_response",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="call",
            name="output_items",
            field=models.JSONField(default=list),
        ),
        migrations.AddField(
            model_name="call",
            name="window_gap",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="call", index=index) for index in INDEXES],
            database_operations=[migrations.RunPython(create, drop)],
        ),
    ]
