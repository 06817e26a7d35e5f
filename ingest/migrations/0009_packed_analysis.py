# The analysis moves from jsonb to a packed (deflated, preset dictionary) column, by hand: jsonb does not
# cast to bytea.

from django.db import migrations, models

import ingest.models
from ingest import compact


def pack_analyses(apps, schema_editor):
    Call = apps.get_model("ingest", "Call")
    calls = Call.objects.filter(analysis__isnull=False).only("id", "analysis").order_by("id")
    last = 0
    while chunk := list(calls.filter(id__gt=last)[:500]):
        for call in chunk:
            call.packed_analysis = compact.pack_json(call.analysis)
            call.window_total = (call.analysis.get("buckets") or {}).get("total")
        Call.objects.bulk_update(chunk, ["packed_analysis", "window_total"])
        last = chunk[-1].id


def unpack_analyses(apps, schema_editor):
    Call = apps.get_model("ingest", "Call")
    calls = Call.objects.filter(packed_analysis__isnull=False).only("id", "packed_analysis").order_by("id")
    last = 0
    while chunk := list(calls.filter(id__gt=last)[:500]):
        for call in chunk:
            call.analysis = compact.unpack_json(call.packed_analysis)
        Call.objects.bulk_update(chunk, ["analysis"])
        last = chunk[-1].id


class Migration(migrations.Migration):
    dependencies = [("ingest", "0008_item_lists")]

    operations = [
        migrations.AddField(model_name="call", name="window_total", field=models.BigIntegerField(null=True)),
        migrations.AddField(model_name="call", name="packed_analysis", field=models.BinaryField(null=True)),
        migrations.RunPython(pack_analyses, unpack_analyses),
        migrations.RemoveField(model_name="call", name="analysis"),
        migrations.RenameField(model_name="call", old_name="packed_analysis", new_name="analysis"),
        migrations.AlterField(
            model_name="call", name="analysis", field=ingest.models.PackedJSONField(null=True)
        ),
    ]
