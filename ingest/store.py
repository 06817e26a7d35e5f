"""Turn a stored raw batch into span and log-record rows. Safe to run twice, and concurrently."""

import logging
import zlib
from collections.abc import Callable
from functools import partial

from django.db import DataError, transaction
from django.utils import timezone
from google.protobuf.message import DecodeError

from ingest import families, locks, otlp, pipeline, raw_rows, session_calls
from ingest.bulk import insert_rows
from ingest.call_rows import Batch
from ingest.late_content import join_log_events
from ingest.models import LogRecord, RawBatch

logger = logging.getLogger(__name__)


class BadBatch(Exception):
    """The stored data cannot be processed; retrying will not help."""


def process_batch(batch_id: int, then: Callable[[int], object] | None = None, wait: bool = True) -> str:
    """Store the rows of one pending batch; returns ``done``, ``failed``, ``skipped`` or ``busy``.

    ``then(run_id)`` runs once the batch is committed, for each run whose new calls await analysis (the
    task passes its next step here, so this module needs nothing from the task queue). ``wait`` off:
    if another batch holds one of its traces or runs, leave the batch pending and return ``busy``."""
    with transaction.atomic():
        # Losing this commit in a crash loses the batch's "done" with it: the batch is pending again and
        # is processed anew. So this commit need not wait for the disk; the receiver's does.
        locks.begin(synchronous_commit=False)
        # skip_locked: a second delivery of the same task, running at the same time, does nothing.
        batch = (
            RawBatch.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("project")
            .filter(id=batch_id, status=RawBatch.Status.PENDING)
            .first()
        )
        if batch is None:
            logger.info("batch %s is gone, done or being processed elsewhere; nothing to do", batch_id)
            return "skipped"
        batch.attempts += 1
        # The body is written back only when it changes: rewriting an unchanged one stored it anew (its
        # few hundred KB of TOAST and WAL), the costliest statement of a batch.
        changed = ["status", "error", "attempts", "processed_at"]
        try:
            with transaction.atomic():  # a savepoint: bad data leaves no partial rows behind
                runs = _store(batch, wait)
        except locks.Busy:
            return "busy"  # the batch is left as it was (pending), and the locks taken are released
        except BadBatch as exc:
            batch.status = RawBatch.Status.FAILED
            batch.error = str(exc)[:500]
            logger.warning("batch %s failed: %s", batch.id, batch.error)
        else:
            batch.status = RawBatch.Status.DONE
            if batch.project.hash_only:
                batch.body = b""  # hash-only: the content is gone once the batch is processed
                changed.append("body")
            for run_id in sorted(runs) if then is not None else ():
                transaction.on_commit(partial(then, run_id), robust=True)
        batch.processed_at = timezone.now()
        batch.save(update_fields=changed)
        return batch.status


# A batch is stored a part at a time, all in its one transaction: a worker holds one part's rows and
# what is made of them, not the whole batch's, so its peak memory does not grow with the batch's size.
# Exporters' batches (512 spans by default) are usually one part.
PART_BYTES = 4 * 1024 * 1024


def _store(batch: RawBatch, wait: bool = True) -> set[int]:
    """Write the batch's rows; returns the ids of the runs whose calls changed."""
    try:
        message = otlp.load(batch.signal, otlp.stored_request(bytes(batch.body)))
    except (zlib.error, otlp.OtlpError, DecodeError, ValueError) as exc:
        raise BadBatch(f"stored body cannot be decoded: {exc}") from exc
    scope = Batch(batch.project_id, keep_content=not batch.project.hash_only)
    runs: set[int] = set()
    try:
        if batch.signal == RawBatch.Signal.TRACES:
            parts = _decoded(otlp.span_parts(message, PART_BYTES))
            runs |= pipeline.store_spans(batch, scope, message, parts, wait)
        else:
            for part in _decoded(otlp.log_parts(message, PART_BYTES)):
                runs |= _store_log_records(batch, scope, part)
    except DataError as exc:
        raise BadBatch(f"the database refused a value: {str(exc).splitlines()[0]}") from exc
    return runs


def _decoded(parts):
    """The parts, with a value that cannot be decoded as the batch's failure."""
    try:
        yield from parts
    except ValueError as exc:
        raise BadBatch(f"stored body cannot be decoded: {exc}") from exc


def _store_log_records(batch: RawBatch, scope: Batch, rows: list) -> set[int]:
    resource_ids = raw_rows.resource_ids(batch.project_id, [resource for resource, _ in rows])
    if not scope.keep_content:  # hash-only: the coding CLIs' content attributes are never stored
        rows = [(resource, _without_log_content(row)) for resource, row in rows]
    common = raw_rows.common(batch)
    insert_rows(
        LogRecord,
        [
            {
                "resource_id": resource_ids[id(resource)],
                "record_hash": raw_rows.digest([resource_ids[id(resource)], row]),
                **common,
                **row,
            }
            for resource, row in rows
        ],
    )
    log_rows = [row for _, row in rows]
    runs = join_log_events(scope, log_rows)
    return runs | session_calls.refresh(scope, "logs", log_rows)


def _without_log_content(row: dict) -> dict:
    attributes = row["attributes"]
    if not any(key in attributes for key in families.LOG_CONTENT_KEYS):
        return row
    kept = {key: value for key, value in attributes.items() if key not in families.LOG_CONTENT_KEYS}
    return {**row, "attributes": {**kept, "ctxview.content_dropped": True}}
