"""Re-ask keys are stored sealed (ctxview.sealing), and a project calls out only with an instance
admin's grant. An endpoint set before this keeps working only once an instance admin grants its project:
its key is sealed here, so nothing is asked again."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def seal_keys(apps, schema_editor):
    from ctxview.sealing import seal

    ReaskEndpoint = apps.get_model("ctxview", "ReaskEndpoint")
    for endpoint in ReaskEndpoint.objects.all():
        key = endpoint.api_key
        endpoint.sealed_key = seal(key)
        endpoint.key_hint = key[-4:] if len(key) >= 12 else ""
        endpoint.save(update_fields=["sealed_key", "key_hint"])


class Migration(migrations.Migration):
    dependencies = [
        ("ctxview", "0003_reask_endpoint"),
        ("ingest", "0013_span_linked_roots"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboundGrant",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("granted_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "granted_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "project",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="outbound_grant", to="ingest.project"
                    ),
                ),
            ],
        ),
        migrations.AddField(model_name="reaskendpoint", name="sealed_key", field=models.TextField(default="")),
        migrations.AddField(
            model_name="reaskendpoint", name="key_hint", field=models.CharField(default="", max_length=8)
        ),
        migrations.RunPython(seal_keys, migrations.RunPython.noop),
        migrations.RemoveField(model_name="reaskendpoint", name="api_key"),
        migrations.AlterField(model_name="reaskendpoint", name="sealed_key", field=models.TextField()),
    ]
