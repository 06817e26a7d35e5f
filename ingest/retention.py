"""Deleting data: a run by hand, and everything older than a project's retention, periodically.

A run takes with it its calls, findings, checkpoints, notes and labels (foreign keys), the spans and log
records of its traces (unless another run still has calls in the same trace), the item lists no
remaining call needs, and the content no remaining item list refers to. Raw batches have their own,
shorter retention; a pending batch is never deleted (it holds data not yet processed), and a processed
one is recompressed harder until then.
"""

import logging
import zlib
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from ingest import itemlists, otlp
from ingest.models import Call, Content, ItemList, LogRecord, Project, RawBatch, Run, Span

logger = logging.getLogger(__name__)

CHUNK = 200


def referenced_hashes(project_id: int, hashes: set[str]) -> set[str]:
    """Which of these content hashes an item of a stored item list of the project still refers to (every
    item of a list entered it or a list it is based on, and a list's bases are kept while it is)."""
    if not hashes:
        return set()
    lists = ItemList.objects.filter(project_id=project_id)
    found: set[str] = set()
    if connection.vendor == "postgresql":
        # One containment test per hash, each answered by the GIN index on ItemList.entered.
        found = {
            content_hash
            for content_hash in hashes
            if lists.filter(entered__contains=[{"hash": content_hash}]).exists()
        }
    else:
        for entered in lists.values_list("entered", flat=True).iterator():
            found.update(item["hash"] for item in entered if item["hash"] in hashes)
    return found


def delete_runs(project_id: int, run_ids: list[int]) -> dict[str, int]:
    """Delete runs and every row that hangs off them; returns counts by kind."""
    counts = {"runs": 0, "calls": 0, "spans": 0, "log_records": 0, "contents": 0}
    with transaction.atomic():
        calls = Call.objects.filter(project_id=project_id, run_id__in=run_ids)
        lists: set[int] = set()
        traces: set[str] = set()
        for trace_id, list_id in calls.values_list("trace_id", "item_list_id").iterator():
            counts["calls"] += 1
            traces.add(trace_id)
            lists.add(list_id)
        Run.objects.filter(project_id=project_id, id__in=run_ids).delete()
        hashes = itemlists.collect(project_id, lists - {None})
        counts["runs"] = len(run_ids)
        shared = set(
            Call.objects.filter(project_id=project_id, trace_id__in=traces).values_list("trace_id", flat=True)
        )
        gone = list(traces - shared)
        counts["spans"], _ = Span.objects.filter(project_id=project_id, trace_id__in=gone).delete()
        counts["log_records"], _ = LogRecord.objects.filter(project_id=project_id, trace_id__in=gone).delete()
        unreferenced = hashes - referenced_hashes(project_id, hashes)
        counts["contents"], _ = Content.objects.filter(project_id=project_id, hash__in=unreferenced).delete()
    return counts


def compact_raw_batches(project: Project) -> int:
    """Recompress the bodies of processed batches at zlib's best level (about a third smaller); returns
    how many. The receiver compresses fast, to answer soon (or keeps a gzipped request as sent); a
    processed batch stays only to be replayed, which reads it as before. Pending and failed batches are
    left as they are."""
    batches = RawBatch.objects.filter(project=project, status=RawBatch.Status.DONE, compacted=False)
    count, last = 0, 0
    while chunk := list(batches.filter(id__gt=last).order_by("id").only("id", "body")[:CHUNK]):
        for batch in chunk:
            if batch.body:  # hash-only projects keep none
                batch.body = zlib.compress(otlp.stored_request(bytes(batch.body)), 9)
            batch.compacted = True
        RawBatch.objects.bulk_update(chunk, ["body", "compacted"])
        count += len(chunk)
        last = chunk[-1].id
    return count


def apply_retention(project: Project, now=None) -> dict[str, int]:
    """Delete the project's runs, spans and log records older than its retention, and old raw batches."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=project.retention_days)
    totals = {"runs": 0, "calls": 0, "spans": 0, "log_records": 0, "contents": 0, "raw_batches": 0}
    # A child run whose calls moved into its session (ingest.agent_sessions) keeps no call: it goes by the
    # time it was last changed.
    old_runs = (
        Run.objects.filter(project=project)
        .filter(
            Q(last_call_at__lt=cutoff) | Q(last_call_at__isnull=True, call_count=0, updated_at__lt=cutoff)
        )
        .values_list("id", flat=True)
    )
    while batch := list(old_runs[:CHUNK]):
        for kind, count in delete_runs(project.id, batch).items():
            totals[kind] += count
    # Spans and log records that never became part of a run (other operations, stray traces).
    cutoff_ns = int(cutoff.timestamp() * 1e9)
    count, _ = Span.objects.filter(
        project=project, received_at__lt=cutoff, start_time_unix_nano__lt=cutoff_ns
    ).delete()
    totals["spans"] += count
    count, _ = LogRecord.objects.filter(project=project, received_at__lt=cutoff).delete()
    totals["log_records"] += count
    # Lists no call needs any more (a call replaced by a better span of its request, or re-assembled).
    hashes = itemlists.collect(project.id)
    unreferenced = hashes - referenced_hashes(project.id, hashes)
    count, _ = Content.objects.filter(project=project, hash__in=unreferenced).delete()
    totals["contents"] += count
    raw_cutoff = now - timedelta(days=project.raw_retention_days)
    count, _ = (
        RawBatch.objects.filter(project=project, received_at__lt=raw_cutoff)
        .exclude(status=RawBatch.Status.PENDING)
        .delete()
    )
    totals["raw_batches"] = count
    totals["raw_batches_compacted"] = compact_raw_batches(project)
    if any(totals.values()):
        logger.info("retention for %s: %s", project.slug, totals)
    return totals
