"""The write side's one lock protocol: which locks a transaction takes, in which order, and how.

A batch (or a task) takes its locks in this order, each kind in one sorted sweep, never the other way
round, so no two transactions deadlock:

1. **Join locks** (``join_traces``): one advisory lock per (project, trace). A call and its content log
   records may come in different batches; a span batch looks for its calls' records and a log batch for
   its records' calls, and run at the same time each would miss the other's uncommitted rows. Log
   batches take them exclusive, span batches shared (two span batches join nothing with each other,
   and a conversation's traces often straddle two batches processed at once).
2. **Trace claims** (``claim_traces``, ``try_claim_traces``): one exclusive advisory lock per trace,
   taken once the batch's spans are interpreted and before writing what depends on the rest of each
   trace (calls, agents, numbering): batches that share a trace are written one after the other, in
   order. A caller that must not wait tries, and requeues its batch when it cannot (``Busy``).
3. **Run rows** (``lock_runs``): ``SELECT … FOR UPDATE`` of the runs written to, in id order; without
   waiting, a run locked elsewhere is ``Busy``. The run's row lock also serialises numbering and
   analysis (``analyse.analyse_run``).

All are held until the transaction ends, and a transaction that takes them starts with ``begin``: it
ends by itself if its client falls silent between statements for ``CTXVIEW_LOCK_IDLE_SECONDS``
(PostgreSQL's ``idle_in_transaction_session_timeout``, for this transaction only, so it holds through
PgBouncer), or, on a TCP connection, goes silent inside a statement (a COPY waiting for its rows) for
about as long (TCP keepalives and ``tcp_user_timeout`` on the server's socket). A worker host lost
mid-batch (cut off, frozen) then releases its locks within that time instead of holding up every batch
of its traces and runs until PostgreSQL gives up on the connection; its batch is still pending and is
processed again (tests/multihost).

The keys are part of the protocol: a worker of the previous release may run beside one of this release
during an upgrade, so the hash of each kind stays as it is.
SQLite (the embedded mode) has one writer at a time: there is nothing to take.
"""

import hashlib
from collections.abc import Iterable

from django.conf import settings
from django.db import OperationalError, connection
from django.db.models import QuerySet

from ingest.models import Run


class Busy(Exception):
    """Another transaction holds a trace or a run this one needs: try the batch later instead of waiting."""


def _postgresql() -> bool:
    return connection.vendor == "postgresql"


def begin(synchronous_commit: bool = True) -> None:
    """First in a transaction that takes these locks: bound how long a silent client may hold them (and,
    with ``synchronous_commit`` off, do not wait for the disk at commit), in one statement."""
    if not _postgresql():
        return
    idle_s = settings.CTXVIEW_LOCK_IDLE_SECONDS
    idle_ms = f"{idle_s * 1000:.0f}"
    with connection.cursor() as cursor:
        # Silent between statements: idle_in_transaction_session_timeout. Silent inside one (a COPY
        # waiting for its rows, an answer unacknowledged) the session is not idle: TCP keepalives and
        # tcp_user_timeout on the server's socket end it then (no-ops on a Unix socket).
        cursor.execute(
            "SELECT set_config('idle_in_transaction_session_timeout', %s, true),"
            " set_config('tcp_keepalives_idle', %s, true), set_config('tcp_keepalives_interval', '1', true),"
            " set_config('tcp_keepalives_count', '3', true), set_config('tcp_user_timeout', %s, true),"
            " set_config('synchronous_commit', %s, true)",
            [idle_ms, f"{max(1, idle_s):.0f}", idle_ms, "on" if synchronous_commit else "off"],
        )


def _join_key(project_id: int, trace_id: str) -> int:
    digest = hashlib.blake2b(f"content-join:{project_id}:{trace_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def join_traces(project_id: int, trace_ids: Iterable[str], shared: bool) -> None:
    """1. The join locks of ``trace_ids`` (shared for a span batch, exclusive for a log batch)."""
    if not _postgresql():
        return
    keys = sorted({_join_key(project_id, trace_id) for trace_id in trace_ids})
    if not keys:
        return
    lock = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count({lock}(key)) FROM unnest(%s::bigint[]) AS key", [keys])


# 2. Trace claims hash the trace id alone (hashtextextended, seed 14): another project's batch with the
# same trace id waits too, which costs only a wait.
def claim_traces(traces: set[str]) -> None:
    """2. Claim ``traces``, waiting for the batches that hold them to commit."""
    if traces and _postgresql():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(t, 14)) FROM unnest(%s::text[]) t ORDER BY t",
                [sorted(traces)],
            )


def try_claim_traces(traces: set[str]) -> bool:
    """2. ``claim_traces`` without waiting: False if another batch holds one of them (those it could
    take stay held until the transaction ends, which the caller then ends)."""
    if not traces or not _postgresql():
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT bool_and(pg_try_advisory_xact_lock(hashtextextended(t, 14))) "
            "FROM (SELECT t FROM unnest(%s::text[]) t ORDER BY t) AS sorted",
            [sorted(traces)],
        )
        return bool(cursor.fetchone()[0])


def lock_runs(runs: QuerySet[Run], wait: bool = True) -> list[Run]:
    """3. The runs of ``runs``, their rows locked, in id order; ``Busy`` (``wait`` off) when another
    transaction holds one of them."""
    locked = runs.select_for_update(of=("self",), nowait=not wait).order_by("id")
    try:
        return list(locked)
    except OperationalError as exc:  # nowait: a run's row is locked by another batch
        raise Busy(str(exc)) from exc
