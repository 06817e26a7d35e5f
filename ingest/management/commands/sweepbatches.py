from django.conf import settings
from django.core.management.base import BaseCommand

from ingest.tasks import sweep_batches


class Command(BaseCommand):
    help = "Enqueue again the batches left pending (for example because the broker was down)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=int,
            default=settings.CTXVIEW_SWEEP_AFTER_SECONDS,
            help="only batches received at least this many seconds ago (default: %(default)s)",
        )

    def handle(self, *args, older_than: int, **options):
        count = sweep_batches(older_than)
        self.stdout.write(f"enqueued {count} pending batches")
