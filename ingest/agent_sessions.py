"""Each call's agent invocation and session, resolved again whenever more of its trace arrives.

The rules are ``ingest.agents`` (pure); this module reads the stored part of each touched trace (span
links, tool and agent spans, calls), gives the calls their agent fields, and moves the calls of a child
run (a delegated agent with a conversation id of its own) into its parent's session, and a call that names
no run of its own into the run a span above it names (``declared``: a parent span of any kind with the
session id ends, and so arrives, after its calls). A stored call whose
agent, turn context or run changes is unnumbered, so its run is renumbered and its analysis redone from
that call on (``numbering.number_calls`` then ``analyse.invalidate``). The caller holds the batch's
transaction and the locks of the runs it touches.
"""

import re
from collections import defaultdict
from dataclasses import dataclass, field, replace

from django.db import connection
from django.db.models import F, Q, QuerySet, TextField
from django.db.models.functions import Cast

from ingest import agents, locks, normalise, semconv
from ingest.analyse import invalidate
from ingest.bulk import update_rows
from ingest.models import Call, Finding, Operation, Run, Span
from ingest.records import CallRecord

AGENT_FIELDS = (
    "agent_name",
    "agent_invocation",
    "parent_invocation",
    "agent_entry",
    "agent_depth",
    "root_invocation",
    "agent_tools",
)


# How far the traces linked to a batch's traces are followed (each a query): a chain of child traces
# longer than this is cut there.
LINK_ROUNDS = 4
LINKED_TRACES = 64
HEX_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def _linked_roots(
    project_id: int, traces: set[str], parents: set[str] = frozenset()
) -> dict[tuple[str, str], tuple[str, str]]:
    """The root spans of ``traces`` that continue a span elsewhere, and the root spans of other traces
    that continue a span of ``parents``: (trace, root span) -> (trace, span) it continues."""
    roots = Span.objects.filter(project_id=project_id, parent_span_id="").exclude(links=[])
    rows = list(roots.filter(trace_id__in=traces).values_list("trace_id", "span_id", "links"))
    parents = {trace for trace in parents if HEX_TRACE_ID.fullmatch(trace)}
    if parents:
        rows += _linking_into(roots, parents).values_list("trace_id", "span_id", "links")[:LINKED_TRACES]
    found = {}
    for trace_id, span_id, links in rows:
        parent = agents.linked_parent(trace_id, links)
        if parent is not None:
            found[(trace_id, span_id)] = parent
    return found


def _linking_into(roots: QuerySet, parents: set[str]) -> QuerySet:
    """The root spans with a link into one of ``parents``.

    PostgreSQL: by containment, which the partial GIN index span_linked_roots answers from the linked
    roots alone; matching the links' text scanned every span of the project for each batch (95 ms a
    batch at 300,000 spans, growing with them). SQLite has no containment: the id in the links' text
    (only hex ids make the pattern)."""
    if connection.vendor == "postgresql":
        into = Q()
        for trace in sorted(parents):
            into |= Q(links__contains=[{"trace_id": trace}])
        return roots.filter(into)
    text = roots.annotate(links_text=Cast("links", TextField()))
    return text.filter(links_text__regex="|".join(sorted(parents)))


def linked_traces(project_id: int, traces: set[str], new_agents: set[str] = frozenset()) -> set[str]:
    """``traces`` and the traces linked to them (a child agent's trace whose root span links to a span of
    its parent's, either way round): resolved together, whichever arrived first. ``new_agents``: the
    traces whose agent spans the batch brings (not stored yet)."""
    found = set(traces)
    frontier = set(traces)
    for _ in range(LINK_ROUNDS):
        if not frontier or len(found) >= LINKED_TRACES:
            break
        # Only a trace with an agent span can be a parent.
        parents = with_agents(project_id, frontier) | (new_agents & frontier)
        edges = _linked_roots(project_id, frontier, parents)
        new = {trace for (child, _), (parent, _) in edges.items() for trace in (child, parent)} - found
        found |= new
        frontier = new
    return found


def with_agents(project_id: int, traces: set[str]) -> set[str]:
    """The traces that have an agent span stored: only their calls can belong to an invocation."""
    if not traces:
        return set()
    return set(
        Operation.objects.filter(
            project_id=project_id, kind=Operation.Kind.AGENT, trace_id__in=traces
        ).values_list("trace_id", flat=True)
    )


def runs_of(project_id: int, traces: set[str]) -> set[int]:
    """The runs holding calls of these traces (to be locked with the batch's own)."""
    if not traces:
        return set()
    return set(
        Call.objects.filter(project_id=project_id, trace_id__in=traces).values_list("run_id", flat=True)
    )


@dataclass
class Declared:
    """Where the calls that name no run of their own belong: in the run a span above them names."""

    records: list[CallRecord]  # the batch's new calls, each with the run it belongs in
    moves: dict[int, str] = field(default_factory=dict)  # stored call id -> the key of the run it belongs in
    runs: dict[str, tuple[str, str]] = field(default_factory=dict)  # those runs' keys -> (source, service)
    sources: set[int] = field(default_factory=set)  # the runs those stored calls are in (their traces')
    traces: set[str] = field(default_factory=set)  # their traces
    # The span links read for this, by trace: ``resolve`` builds those traces' trees from them.
    links: dict[str, dict[str, str]] = field(default_factory=dict)


def declared(project_id: int, traces: set[str], records: list[CallRecord]) -> Declared:
    """The run that the nearest span above names (``agents.declared_key``) for each call that names none (it
    is in its trace's run): the new ``records`` get its key, and the stored calls of ``traces`` are to move.
    Every span of the batch is stored by now: the batch's own spans name runs too."""
    found = Declared(list(records))
    unnamed = {record.trace_id for record in records if record.run_key_source == normalise.TRACE_KEY_SOURCE}
    # The traces with a run of their own (by key, not by scanning their calls): only they hold stored calls
    # that named no run.
    trace_runs = set(
        Run.objects.filter(
            project_id=project_id, key__in=traces, key_source=normalise.TRACE_KEY_SOURCE
        ).values_list("key", flat=True)
    )
    named = _named_runs(project_id, unnamed | trace_runs)
    if not named:
        return found
    stored = Call.objects.filter(
        project_id=project_id,
        trace_id__in=trace_runs & set(named),
        run__key_source=normalise.TRACE_KEY_SOURCE,
        run__key=F("trace_id"),
    ).values_list("id", "trace_id", "span_id", "parent_span_id", "run_id", "run__service_name")
    links = found.links = _links(project_id, set(named))

    def key_of(trace_id: str, span_id: str, parent_span_id: str) -> tuple[str, str] | None:
        spans = named.get(trace_id, {})
        return spans.get(span_id) or agents.declared_key(parent_span_id, links[trace_id], spans)

    for index, record in enumerate(records):
        if record.run_key_source != normalise.TRACE_KEY_SOURCE:
            continue
        key = key_of(record.trace_id, record.span_id, record.parent_span_id)
        if key is not None:
            found.records[index] = replace(record, run_key=key[0], run_key_source=key[1])
    for call_id, trace_id, span_id, parent_span_id, run_id, service in stored:
        key = key_of(trace_id, span_id, parent_span_id)
        if key is not None and key[0] != trace_id:
            found.moves[call_id] = key[0]
            found.runs.setdefault(key[0], (key[1], service))
            found.sources.add(run_id)
            found.traces.add(trace_id)
    return found


def _named_runs(project_id: int, traces: set[str]) -> dict[str, dict[str, tuple[str, str]]]:
    """The stored spans of ``traces`` that name a run, as ``normalise.run_key`` reads it: trace -> span ->
    (key, the attribute it came from). Only those attributes are read, not the spans' whole attributes; on
    PostgreSQL only those spans (the partial index span_named_runs has this query's predicate)."""
    if not traces:
        return {}
    paths = [f"attributes__{key}" for key in semconv.RUN_KEYS]
    spans = Span.objects.filter(
        project_id=project_id, trace_id__in=traces, attributes__has_any_keys=list(semconv.RUN_KEYS)
    )
    found: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for trace_id, span_id, *values in spans.values_list("trace_id", "span_id", *paths):
        key, source = normalise.run_key(dict(zip(semconv.RUN_KEYS, values, strict=True)), trace_id)
        if source != normalise.TRACE_KEY_SOURCE:
            found[trace_id][span_id] = (key, source)
    return found


def _links(project_id: int, traces: set[str]) -> dict[str, dict[str, str]]:
    """Each trace's stored span links: span id -> parent span id."""
    links: dict[str, dict[str, str]] = defaultdict(dict)
    for trace_id, span_id, parent in Span.objects.filter(
        project_id=project_id, trace_id__in=traces
    ).values_list("trace_id", "span_id", "parent_span_id"):
        links[trace_id][span_id] = parent
    return links


def _trees(
    project_id: int, traces: set[str], read: dict[str, dict[str, str]] | None = None
) -> dict[str, tuple[agents.Tree, dict[str, agents.AgentSpan]]]:
    """Each trace's span tree and agent spans; traces linked to each other share one (merged) tree.
    ``read``: span links already read in this transaction, by trace (not read again)."""
    known = {trace_id: dict(spans) for trace_id, spans in (read or {}).items() if trace_id in traces}
    links = _links(project_id, traces - set(known))
    links.update(known)
    # A linked root's parent is the span it continues in the other trace (when that trace is here).
    continues = {
        root: parent for root, parent in _linked_roots(project_id, traces).items() if root[0] in traces
    }
    for (trace_id, span_id), (_, parent_span) in continues.items():
        links[trace_id][span_id] = parent_span
    tools: dict[str, set[str]] = defaultdict(set)
    agent_rows = {}
    for trace_id, span_id, parent, kind, start_ns, run_key in Operation.objects.filter(
        project_id=project_id, trace_id__in=traces
    ).values_list("trace_id", "span_id", "parent_span_id", "kind", "start_ns", "run_key"):
        if kind == Operation.Kind.TOOL:
            tools[trace_id].add(span_id)
        else:
            agent_rows[(trace_id, span_id)] = (parent, start_ns, run_key)
    spans_of: dict[str, dict[str, agents.AgentSpan]] = defaultdict(dict)
    attributes = Span.objects.filter(
        project_id=project_id,
        trace_id__in={trace for trace, _ in agent_rows},
        span_id__in={span for _, span in agent_rows},
    ).values_list("trace_id", "span_id", "name", "attributes")
    for trace_id, span_id, span_name, values in attributes:
        if (trace_id, span_id) not in agent_rows:
            continue
        parent, start_ns, run_key = agent_rows[(trace_id, span_id)]
        parent = continues.get((trace_id, span_id), (None, parent))[1]
        agent = agents.agent_span(span_id, parent, values, start_ns, run_key, span_name)
        if agent is not None:
            spans_of[trace_id][span_id] = agent
    groups = agents.trace_groups(traces, [(child[0], parent[0]) for child, parent in continues.items()])
    merged: dict[frozenset, tuple[agents.Tree, dict[str, agents.AgentSpan]]] = {}
    for group in set(groups.values()):
        ordered = sorted(group)
        merged[group] = (
            agents.Tree(
                {span: parent for trace in ordered for span, parent in links[trace].items()},
                {span for trace in ordered for span in tools[trace]},
            ),
            {span: agent for trace in ordered for span, agent in spans_of[trace].items()},
        )
    return {trace: merged[groups[trace]] for trace in traces}


def _fields(found: agents.CallAgent) -> dict:
    invocation = found.invocation
    return {
        "agent_name": found.agent or "",
        "agent_invocation": invocation.id if invocation else "",
        "parent_invocation": (invocation.parent or "") if invocation else "",
        "agent_entry": invocation.entered if invocation else "",
        "agent_depth": invocation.depth if invocation else 0,
        "root_invocation": invocation.root if invocation else "",
        "agent_tools": list(found.tools),
    }


def resolve(
    project_id: int,
    traces: set[str],
    new_calls: list[Call],
    runs: dict[str, Run],
    named: Declared | None = None,
) -> set[int]:
    """Give the new calls (not stored yet) and the stored calls of ``traces`` their agent fields and run.

    ``runs``: the locked runs by key (runs found here are locked and added); ``named``: the stored calls
    that belong in the run a span above them names (``declared``; those runs are in ``runs``). Returns the
    ids of the runs whose stored calls changed: they must be renumbered."""
    named_run = {call_id: runs[key].id for call_id, key in named.moves.items()} if named else {}
    traces = with_agents(project_id, traces) | (named.traces if named else set())
    if not traces:
        return set()
    trees = _trees(project_id, traces, named.links if named else None)
    stored = list(
        Call.objects.filter(project_id=project_id, trace_id__in=traces).only(
            "id",
            "run_id",
            "trace_id",
            "span_id",
            "parent_span_id",
            "start_ns",
            "seq",
            "request_model",
            "response_model",
            *AGENT_FIELDS,
            *Run.USAGE_FIELDS,
        )
    )
    pending = [call for call in new_calls if call.trace_id in traces]
    changed: dict[int, Call] = {}
    placed, invocations_of, spans_of = [], {}, {}
    by_tree: dict[int, tuple] = {}  # linked traces share one tree: resolve it once
    call_parents: dict[int, list[str]] = defaultdict(list)  # by tree
    for call in [*stored, *pending]:
        call_parents[id(trees[call.trace_id][0])].append(call.parent_span_id)
    for trace_id, (tree, agent_spans) in trees.items():
        if id(tree) not in by_tree:
            # A graph's steps that are its agent's work are no agent spans of their own.
            agent_spans = agents.without_steps(tree, agent_spans, call_parents[id(tree)])
            acting = agents.acting(tree, agent_spans, call_parents[id(tree)])
            workflows = set(agent_spans) - set(acting)  # nameless agent spans without calls of their own
            by_tree[id(tree)] = (agent_spans, agents.invocations(tree, acting, workflows))
        spans_of[trace_id], invocations_of[trace_id] = by_tree[id(tree)]
    for index, call in enumerate([*stored, *pending]):
        invocations, tree = invocations_of[call.trace_id], trees[call.trace_id][0]
        found = agents.call_agent(
            call.parent_span_id, call.agent_name, tree, spans_of[call.trace_id], invocations
        )
        fields = _fields(found)
        if any(getattr(call, name) != value for name, value in fields.items()):
            for name, value in fields.items():
                setattr(call, name, value)
            if call.pk is not None:
                changed[call.pk] = call
        # Where the call belongs before its session: the run a span above it names, or where it is.
        belongs = named_run.get(call.pk, call.run_id) if call.pk is not None else call.run_id
        placed.append(agents.Placed(index, belongs, call.start_ns, call.span_id, found.invocation))
    everything = [*stored, *pending]
    sessions = agents.session_runs(placed)
    moves = {
        index: target
        for index, place in enumerate(placed)
        if (target := sessions.get(index, place.run_id)) != everything[index].run_id
    }
    touched = {call.run_id for call in changed.values()} | {everything[index].run_id for index in moves}
    by_id = _lock(runs, touched | set(moves.values()))
    renumber = {call.run_id for call in changed.values()}  # (new calls are numbered as they are stored)
    sources: dict[int, int] = {}  # source run -> earliest start moved out of it
    for index, target in moves.items():
        call = everything[index]
        source = call.run_id
        if call.pk is not None:  # (a new call is numbered in its new run as it is stored)
            renumber |= {source, target}
            by_id[source].count_call(call.usage_dict(), sign=-1)
            by_id[target].count_call(call.usage_dict(), call.model, call.agent_name)
            sources[source] = min(sources.get(source, call.start_ns), call.start_ns)
            changed[call.pk] = call
        by_id[source].parent_run_id = target
        call.run_id = target
    for call in changed.values():
        call.seq = call.turn = None
    for source, start in sources.items():
        # What stays in the child run is renumbered from the first call that left it.
        Call.objects.filter(run_id=source, start_ns__gte=start).update(seq=None, turn=None)
    update_rows(Call, list(changed.values()), [*AGENT_FIELDS, "run", "seq", "turn"])
    _emptied({by_id[source] for source in sources}, new_calls)
    _name_sessions(by_id, everything, invocations_of)
    return renumber


def _lock(runs: dict[str, Run], wanted: set[int]) -> dict[int, Run]:
    """The locked runs by id, locking any that the batch did not (another batch's run of the trace)."""
    by_id = {run.id: run for run in runs.values()}
    missing = wanted - set(by_id)
    if missing:
        for run in locks.lock_runs(Run.objects.select_related("project").filter(id__in=missing)):
            runs[run.key] = by_id[run.id] = run
    return by_id


def _emptied(sources: set[Run], new_calls: list[Call]) -> None:
    """A child run whose calls all moved into its session keeps only its link: no calls, no figures."""
    staying = {call.run_id for call in new_calls}
    for run in sources:
        if run.id in staying or run.calls.exists():
            continue
        for name in Run.USAGE_FIELDS:
            setattr(run, name, None)
        run.usage_unknown, run.model_names = {}, []
        run.call_count = run.turn_count = 0
        run.started_at = run.last_call_at = run.last_start_ns = None
        run.last_span_id = run.last_fingerprint = run.last_invocation = run.last_trace_id = run.title = ""
        invalidate(run, 1)
        Finding.objects.filter(run=run).delete()
        Run.objects.filter(id=run.id).update(accounting=None)


def _name_sessions(by_id: dict[int, Run], calls: list[Call], invocations_of: dict) -> None:
    """A run's agent is the root agent of its first call, where that call's root is known."""
    first: dict[int, Call] = {}
    for call in calls:
        best = first.get(call.run_id)
        if best is None or (call.start_ns, call.span_id) < (best.start_ns, best.span_id):
            first[call.run_id] = call
    for run_id, call in first.items():
        run = by_id.get(run_id)
        root = invocations_of[call.trace_id].get(call.root_invocation)
        if run is None or root is None:
            continue
        earlier = run.calls.filter(start_ns__lt=call.start_ns).exclude(trace_id=call.trace_id).exists()
        if not earlier:
            run.agent_name = root.agent
