from django.core.management.base import BaseCommand

from ingest.tasks import apply_retention_task


class Command(BaseCommand):
    help = (
        "Delete runs, spans and raw batches older than each project's retention (Celery beat does it hourly)."
    )

    def handle(self, *args, **options):
        totals = apply_retention_task()
        self.stdout.write(
            ", ".join(f"{count} {kind}" for kind, count in totals.items()) or "nothing to delete"
        )
