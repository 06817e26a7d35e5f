"""Celery tasks of ingest. They take ids, and running one twice leaves the same end state."""

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError
from django.db.models import F
from django.utils import timezone

from ingest.models import RawBatch, Run

logger = logging.getLogger(__name__)


# For tasks that are safe to run twice: redelivered if the worker dies, retried only on faults that may
# pass (the database going away or being restarted).
IDEMPOTENT = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (OperationalError, InterfaceError),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": 8,
}


# Two batches carrying the same span at once (an exporter retrying a request that timed out): both see
# the call as new, the run's lock lets one store it, the other's insert fails on the unique key and rolls
# back. Retried, it finds the call stored and skips it.
# A batch whose trace another worker is storing waits for it once its own spans are interpreted, so that
# batches are written in their order (ingest.calls.claim_traces).
@shared_task(**{**IDEMPOTENT, "autoretry_for": (*IDEMPOTENT["autoretry_for"], IntegrityError)})
def process_batch_task(*, batch_id: int, deferred: int = 0) -> str:
    """``deferred``: ignored (the count of requeues that an earlier version sent with a batch)."""
    from ingest.store import process_batch

    return process_batch(batch_id, then=enqueue_analysis)


@shared_task(**IDEMPOTENT)
def analyse_run_task(*, run_id: int) -> int:
    from ingest.analyse import analyse_run

    return analyse_run(run_id)


def enqueue_analysis(run_id: int) -> None:
    """Enqueue a run's analysis; if the broker is down, the sweeper's next pass catches it up."""
    try:
        analyse_run_task.apply_async(kwargs={"run_id": run_id})
    except Exception as exc:  # kombu raises many kinds; the next batch or sweep enqueues it again
        logger.warning("could not enqueue the analysis of run %s (%s)", run_id, exc)


@shared_task
def apply_retention_task() -> dict[str, int]:
    """Apply every project's retention (Celery beat, hourly). Deleting twice deletes nothing more."""
    from ingest.models import Project
    from ingest.retention import apply_retention

    totals: dict[str, int] = {}
    for project in Project.objects.all():
        for kind, count in apply_retention(project).items():
            totals[kind] = totals.get(kind, 0) + count
    totals["partitions_dropped"] = len(drop_expired_partitions())
    return totals


def drop_expired_partitions() -> list[str]:
    """The day partitions older than every project's retention (ingest.partitions), dropped whole."""
    from django.db.models import Max

    from ingest import partitions
    from ingest.models import Project

    longest = Project.objects.aggregate(
        retention_days=Max("retention_days"), raw_retention_days=Max("raw_retention_days")
    )
    return partitions.drop_expired({field: days for field, days in longest.items() if days is not None})


@shared_task
def create_partitions_task() -> list[str]:
    """The day partitions two days ahead (Celery beat, hourly; ingest.partitions). Twice creates none."""
    from ingest import partitions

    return partitions.ensure_partitions()


@shared_task
def sweep_batches_task() -> int:
    return sweep_batches(settings.CTXVIEW_SWEEP_AFTER_SECONDS)


def enqueue_batch(batch_id: int) -> bool:
    """Enqueue a batch's processing; if the broker is down, leave it pending for the sweeper."""
    try:
        process_batch_task.apply_async(kwargs={"batch_id": batch_id})
    except Exception as exc:  # kombu raises many kinds; the batch is safe in the database either way
        logger.warning("could not enqueue batch %s (%s); the sweeper will enqueue it", batch_id, exc)
        return False
    return True


def sweep_batches(older_than_seconds: int, limit: int = 10_000) -> int:
    """Re-enqueue batches still pending after ``older_than_seconds``; returns how many."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    batch_ids = list(
        RawBatch.objects.filter(status=RawBatch.Status.PENDING, received_at__lte=cutoff)
        .order_by("received_at")
        .values_list("id", flat=True)[:limit]
    )
    enqueued = sum(enqueue_batch(batch_id) for batch_id in batch_ids)
    if batch_ids:
        logger.info("sweeper: %s pending batches, %s enqueued", len(batch_ids), enqueued)
    # Runs whose analysis lags behind their calls (its enqueue was lost, e.g. the broker was down).
    lagging = Run.objects.filter(analysed_seq__lt=F("call_count"), updated_at__lte=cutoff).values_list(
        "id", flat=True
    )
    for run_id in lagging[:limit]:
        enqueue_analysis(run_id)
    return enqueued
