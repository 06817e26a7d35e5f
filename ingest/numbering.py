"""Numbering a run's calls: each call's seq and turn, in start order, whatever order they arrived in.

A run carries the state after its last numbered call (``TurnState``), so calls that arrive in order are
appended without reading the run's calls; a late call renumbers the run from that call on.
"""

from django.db.models import Q

from ingest import agents
from ingest.analyse import ANALYSIS_FIELDS, invalidate
from ingest.bulk import update_rows
from ingest.models import Call, Operation, Run
from ingest.records import datetime_of
from ingest.titles import title_of
from ingest.turns import TurnState, advance

# The fields of a run that ingest writes; the analysis fields belong to the analysis task.
RUN_FIELDS = [field.name for field in Run._meta.concrete_fields if field.name not in ("id", *ANALYSIS_FIELDS)]


def agent_invocations(project_id: int, calls: list[Call]) -> set[str]:
    """Which of these calls' parent spans are agent invocations."""
    parents = {call.parent_span_id for call in calls if call.parent_span_id}
    if not parents:
        return set()
    return set(
        Operation.objects.filter(
            project_id=project_id,
            kind=Operation.Kind.AGENT,
            trace_id__in={call.trace_id for call in calls},
            span_id__in=parents,
        ).values_list("span_id", flat=True)
    )


def before_last(run: Run, call: Call) -> bool:
    return run.last_start_ns is not None and (call.start_ns, call.span_id) < (
        run.last_start_ns,
        run.last_span_id,
    )


def state_of(run: Run) -> TurnState:
    """The carried state after the run's last numbered call."""
    return TurnState(
        run.call_count,
        run.turn_count,
        run.last_fingerprint or None,
        run.last_invocation or None,
        run.last_trace_id or None,
    )


def _state_after(call: Call | None) -> TurnState:
    if call is None:
        return TurnState()
    return TurnState(
        call.seq, call.turn, call.carried_fingerprint or None, call.carried_invocation or None, call.trace_id
    )


def number(state: TurnState, calls: list[Call], invocations: set[str]) -> TurnState:
    """Give ``calls`` (in order) their seq and turn after ``state``; returns the state after the last."""
    for call in calls:
        # A call inside a tool or a child run (agent_depth > 0) starts no turn: its user message is the
        # parent agent's request, not the user's. Nor does a call of an agent handed the work (a handoff):
        # its user message is what the framework wrote for it (CrewAI's next task), not a new one from
        # outside the agents. Its turn is its root invocation's.
        from_outside = not call.agent_depth and call.agent_entry != agents.HANDOFF
        state = advance(
            state,
            turn_hint=call.turn_hint,
            fingerprint=(call.user_fingerprint or None) if from_outside else None,
            invocation=call.root_invocation
            or (call.parent_span_id if call.parent_span_id in invocations else None),
            trace_id=call.trace_id,
        )
        call.seq, call.turn = state.seq, state.turn
        call.carried_fingerprint = state.fingerprint or ""
        call.carried_invocation = state.invocation or ""
    return state


def remember(run: Run, calls: list[Call], state: TurnState, appended: bool) -> None:
    """Keep on the run the state after its last call, so the next call is numbered without reading the run."""
    last = calls[-1]
    turns = max(call.turn for call in calls)
    run.call_count = state.seq
    run.turn_count = max(run.turn_count, turns) if appended else turns
    run.last_start_ns, run.last_span_id = last.start_ns, last.span_id
    run.last_fingerprint = state.fingerprint or ""
    run.last_invocation = state.invocation or ""
    run.last_trace_id = state.trace_id or ""
    run.last_call_at = datetime_of(last.start_ns)
    if calls[0].seq == 1:  # the run's first call: it starts the run and gives its title
        run.started_at = datetime_of(calls[0].start_ns)
        run.title = title_of(run, calls[0])


# What numbering reads and writes of a stored call: renumbering after a late arrival reads only these,
# not the calls' items (most of a row).
NUMBERING_FIELDS = (
    "run",  # the related manager sets each call's run: deferred, it would cost a query per call
    "seq",
    "turn",
    "turn_hint",
    "user_fingerprint",
    "agent_depth",
    "agent_entry",  # a handoff starts no turn
    "root_invocation",
    "parent_span_id",
    "trace_id",
    "span_id",
    "start_ns",
    "carried_fingerprint",
    "carried_invocation",
)


def number_calls(run: Run, renumber: bool = False) -> None:
    """Give the run's unnumbered calls their seq and turn, and save the run; the caller holds its lock.

    Calls that arrive in order are appended using the run's carried state. A call that starts before
    the run's last numbered call renumbers the run from that call on, so the result does not depend
    on the order in which spans arrived. ``renumber``: numbers were reset (a call's content arrived or
    a call was replaced), so renumber from the first unnumbered call whatever its time.
    """
    unnumbered = run.calls.filter(seq__isnull=True).order_by("start_ns", "span_id")
    first = unnumbered.only("run", "start_ns", "span_id").first()
    if first is None:
        run.save(update_fields=RUN_FIELDS)
        return
    late = renumber or before_last(run, first)
    if late:
        from_first = Q(start_ns__gt=first.start_ns) | Q(start_ns=first.start_ns, span_id__gte=first.span_id)
        calls = list(
            run.calls.filter(from_first | Q(seq__isnull=True))
            .order_by("start_ns", "span_id")
            .only(*NUMBERING_FIELDS)
        )
        previous = (
            run.calls.filter(seq__isnull=False)
            .exclude(from_first)
            .order_by("-start_ns", "-span_id")
            .only(*NUMBERING_FIELDS)
            .first()
        )
        state = _state_after(previous)
    else:
        calls = list(unnumbered.only(*NUMBERING_FIELDS))
        state = state_of(run)
    state = number(state, calls, agent_invocations(run.project_id, calls))
    update_rows(Call, calls, ["seq", "turn", "carried_fingerprint", "carried_invocation"])
    remember(run, calls, state, appended=not late)
    run.save(update_fields=RUN_FIELDS)
    if late:
        invalidate(run, calls[0].seq)
