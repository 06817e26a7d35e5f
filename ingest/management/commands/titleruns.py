from django.core.management.base import BaseCommand
from django.db import transaction

from ingest import locks, titles
from ingest.models import Run

CHUNK = 200


class Command(BaseCommand):
    help = (
        "Give the runs stored before runs had titles (migration 0016) their title; runs stored since get "
        "theirs as they arrive. Safe to run again and beside the workers."
    )

    def handle(self, *args, **options):
        done = titled = 0
        after = 0
        while True:
            ids = list(
                Run.objects.filter(id__gt=after, title="", started_at__isnull=False)
                .order_by("id")
                .values_list("id", flat=True)[:CHUNK]
            )
            if not ids:
                break
            with transaction.atomic():
                for run in locks.lock_runs(Run.objects.select_related("project").filter(id__in=ids)):
                    if titles.retitle(run):
                        Run.objects.filter(id=run.id).update(title=run.title)
                        titled += 1
            done += len(ids)
            after = ids[-1]
        self.stdout.write(f"{titled} of {done} untitled runs titled")
