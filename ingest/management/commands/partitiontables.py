import time

from django.core.management.base import BaseCommand, CommandError

from ingest import partitions


class Command(BaseCommand):
    help = (
        "Partition the span, log-record and raw-batch tables by day, online (PostgreSQL; the migration "
        "does it for small tables), and create the day partitions two days ahead. Ingest may go on "
        "meanwhile; safe to run again."
    )

    def handle(self, *args, **options):
        if not partitions.available():
            raise CommandError("day partitions need PostgreSQL: on SQLite the tables stay plain")
        for spec in partitions.TABLES:
            started = time.monotonic()
            rows = partitions.estimated_rows(spec.table)
            if partitions.convert(spec):
                self.stdout.write(
                    f"{spec.table}: partitioned by {spec.key} (about {rows:,} rows kept in "
                    f"{partitions.partitions(spec.table)[0]}) in {time.monotonic() - started:.1f} s"
                )
            else:
                self.stdout.write(f"{spec.table}: partitioned already")
        created = partitions.ensure_partitions()
        self.stdout.write(
            f"{len(created)} day partitions created ahead" + (f": {', '.join(created)}" if created else "")
        )
