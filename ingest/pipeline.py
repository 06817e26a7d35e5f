"""A span batch becoming stored, numbered and analysed calls: the steps, in order, on one screen.

``store.process_batch`` runs ``store_spans`` inside the batch's transaction. A batch is taken a part
(about 4 MB of spans) at a time; each part is one ``work.BatchWork`` that every step reads and adds to.
The locks are ``ingest.locks``'s protocol: join locks, then trace claims, then run rows, never back.

Before the batch waits for another batch of its traces (nothing here depends on another batch):
  interpret          spans → call records and operations (normalise, the families, token counts)
  insert_spans       the span rows, the calls' content moved out of them (raw_rows)
  store_texts        each new text once per project (contents)
  build              each record's call row, with no run yet
Then the batch's traces are claimed (a batch of the same traces commits first), and:
  link_traces        a child agent's trace with its parent's, claimed too
  keep_new           the calls not stored yet, one per request (dedup)
  find_waiting       stored calls waiting for a response the part brings (continued_calls)
  lock_runs          the runs written to, created and locked in id order
  remove_replaced    stored calls that a better span of the same request replaces
  rebuild            windows of requests that continue a response, and of the stored calls waiting
  store_operations   tool and agent spans
  reset_late_invocations   calls whose agent span came after them lose their numbers
  resolve_agents     agents and sessions: a call of a child run moves to its session's run
  catch_up_relinked  runs whose stored calls were relinked: renumbered and analysed first
  number_and_analyse the new calls numbered, and analysed in line where the run is up to date
  insert_calls       item lists, call rows, the analyses' writes
  add_to_totals      the runs' token and cost totals
  renumber_late      runs with a late call: renumbered with their stored calls
  save_runs          the runs' rows
  retitle            runs whose first call's root span came after it: their title again (titles)
And last, the coding CLIs' sessions refreshed from the part's spans (session_calls).
"""

from collections.abc import Callable

from ingest import calls, continued_calls, locks, otlp, session_calls
from ingest.call_rows import Batch
from ingest.models import RawBatch
from ingest.work import BatchWork

Step = Callable[[BatchWork], None]

# What depends on no other batch: done while another batch of its traces may still be writing (the more
# done before waiting, the less a worker waits).
BEFORE_CLAIM: tuple[Step, ...] = (calls.interpret, calls.insert_spans, calls.store_texts, calls.build)
# Run in this order once the batch's traces are claimed.
AFTER_CLAIM: tuple[Step, ...] = (
    calls.link_traces,
    calls.keep_new,
    continued_calls.find_waiting,
    calls.lock_runs,
    calls.remove_replaced,
    continued_calls.rebuild,
    calls.store_operations,
    calls.reset_late_invocations,
    calls.resolve_agents,
    calls.catch_up_relinked,
    calls.number_and_analyse,
    calls.insert_calls,
    calls.add_to_totals,
    calls.renumber_late,
    calls.save_runs,
    calls.retitle,
)


def store_spans(raw: RawBatch, scope: Batch, message, parts, wait: bool = True) -> set[int]:
    """Write a span batch's ``parts`` (decoded from ``message``); returns the ids of the runs whose calls
    changed and are not analysed yet. Raises ``locks.Busy`` (``wait`` off) when another batch holds one
    of its traces or runs."""
    traces = otlp.trace_ids(message)
    calls.share_traces(scope, traces)
    runs: set[int] = set()
    claimed = False
    for part in parts:
        work = BatchWork(raw, scope, part, traces, wait)
        for step in BEFORE_CLAIM:
            step(work)
        if not claimed:
            if not calls.claim_traces(traces, wait):
                raise locks.Busy("a trace of the batch is being stored by another")
            claimed = True
        for step in AFTER_CLAIM:
            step(work)
        runs |= work.runs_to_analyse()
        runs |= session_calls.refresh(scope, "spans", [row for _, row in work.rows])
    return runs
