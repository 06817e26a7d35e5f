"""One path from a received OTLP export to a durable raw batch, for both receivers (OTLP/HTTP in
receiver.py, OTLP/gRPC in grpc_receiver.py).

``authorise`` turns a key into its project within the key's rate limit; ``accept`` parses, validates,
masks, checks the backlog, commits the raw batch, enqueues its processing on commit and returns the
encoded Export*ServiceResponse. Each refusal is an ``otlp.OtlpError`` whose ``status`` (an HTTP
status) each receiver translates into its own protocol's answer.
"""

import logging
import zlib
from functools import partial

from django.conf import settings
from django.db import DatabaseError, transaction

from ingest import budget, otlp, ratelimit, redact
from ingest.keys import key_id, project_for_key
from ingest.models import Project, RawBatch
from ingest.tasks import enqueue_batch

logger = logging.getLogger(__name__)

# Bytes of request bodies (as read, and decompressed) this process holds at once, over both receivers.
INFLIGHT = budget.Budget(lambda: settings.CTXVIEW_INGEST_MAX_INFLIGHT_BYTES)


class Unauthenticated(otlp.OtlpError):
    status = 401


class Unavailable(otlp.OtlpError):
    """A refusal the sender should retry after ``retry_after`` seconds: nothing it sent is lost."""

    status = 503

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after or settings.CTXVIEW_INGEST_RETRY_AFTER_SECONDS


def authorise(key: str) -> Project:
    """The project of an active ingest key that is within its rate limit."""
    try:
        project = project_for_key(key)
    except DatabaseError as exc:
        # The database is away (a restart, a failover): a retryable answer, so nothing sent is lost.
        logger.warning("could not check an ingest key: %s", exc)
        raise Unavailable("ctxview cannot reach its database right now; retry later") from None
    if project is None:
        raise Unauthenticated("invalid or revoked ingest key")
    if not ratelimit.allow(key_id(key)):
        raise Unavailable("too many requests for this ingest key; retry later", retry_after=1)
    return project


def accept(
    project: Project, signal: str, data: bytes, fmt: str, wire_bytes: int, gzipped: bytes | None = None
) -> bytes:
    """Store the (decompressed) export ``data`` as one raw batch; the answer to send, encoded in ``fmt``.

    ``gzipped``: the request's body as sent, when it came gzipped. The batch is committed before this
    returns, so the answer is only ever sent for stored data."""
    decoded = otlp.validate(signal, otlp.parse_request(signal, data, fmt))
    if decoded.accepted:
        redacted = _mask_secrets(project, decoded, data, fmt)
        # A protobuf body with nothing removed or masked is stored as sent; otherwise re-encode it.
        unchanged = fmt == otlp.PROTOBUF and not decoded.rejected and not redacted
        try:
            if _backlog_is_full():
                raise Unavailable("ctxview is behind on processing; retry later")
            # Sent gzipped and stored as sent, it is stored compressed as it came: compressing it again
            # took about a third of the receiver's CPU (21 ms for a 512-span batch of 2 MB).
            if unchanged and gzipped is not None:
                body = gzipped
            else:
                body = zlib.compress(data if unchanged else decoded.message.SerializeToString(), 1)
            with transaction.atomic():
                batch = RawBatch.objects.create(
                    project=project,
                    signal=signal,
                    body=body,
                    content_type=fmt,
                    wire_bytes=wire_bytes,
                    item_count=decoded.accepted,
                    rejected_count=decoded.rejected,
                    redacted=redacted,
                )
                transaction.on_commit(partial(enqueue_batch, batch.id), robust=True)
        except DatabaseError as exc:
            logger.warning("could not store a %s batch for %s: %s", signal, project.slug, exc)
            raise Unavailable("ctxview cannot store data right now; retry later") from None
    return otlp.export_response(signal, decoded, fmt)


def _mask_secrets(project, decoded: otlp.Decoded, data: bytes, fmt: str) -> int:
    """Mask the project's redaction patterns in every string, before anything is stored."""
    redactor = project.redactor()
    if redactor.combined is None and not redactor.unusable:
        return 0
    # Protobuf embeds strings as UTF-8: when the raw bytes hold no match, no string does.
    if fmt == otlp.PROTOBUF and not redactor.might_match(data):
        return 0
    time_budget = redact.Budget.for_size(len(data))
    changed = redact.mask_request(decoded.message, redactor, time_budget)
    if time_budget.exceeded:
        logger.warning("redaction for %s ran out of time: the rest of a batch was masked whole", project.slug)
    return changed


def _backlog_is_full() -> bool:
    limit = settings.CTXVIEW_INGEST_MAX_PENDING_BATCHES
    return bool(limit) and RawBatch.objects.filter(status=RawBatch.Status.PENDING).count() >= limit
