"""What the panels and pages read from the trace tables, as plain dicts (the pure shaping code takes these).

Each function reads only the fields it needs: a run's series (usage, buckets and cache outcome per call)
pulls two small keys out of ``Call.analysis`` in SQL instead of the whole manifest.
"""

from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import quote

from django.core.cache import cache
from django.db.models import (
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
)
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce, Substr
from django.urls import reverse

from ctxcore.analysis import findings as findings_rules
from ctxcore.analysis.limits import CONTEXT_EDITS, one_hour_tokens
from ctxcore.analysis.limits import context_edits as read_context_edits
from ctxview.models import Bookmark, Label, Note
from ctxview.search import search_runs
from ingest.models import Call, Content, Finding, Operation, Project, Run, Span
from ingest.tool_executions import ToolSpan, executions

USAGE = ("uncached", "cache_write", "cache_read", "output", "prompt_total")
# The finding types a cache break raises (one per cause and part of the request, from its first break).
CACHE_FINDINGS = (findings_rules.CACHE_INVALIDATED, findings_rules.INVISIBLE_INVALIDATOR)


def call_url(call_id: int) -> str:
    return reverse("cv-call", args=[call_id])


def item_url(run_id: int, item_id: str) -> str:
    return f"{reverse('cv-item', args=[run_id])}?id={quote(item_id, safe='')}"


def explain_url(run_id: int, turn: int | str) -> str:
    return f"{reverse('cv-explain', args=[run_id])}?turn={turn}"


def series(run: Run, turn: int | None = None, seqs: tuple[int, int] | None = None) -> list[dict]:
    """Per call in seq order: ids, turn, usage, budget, and the buckets and cache parts of its analysis.

    ``turn`` keeps one turn's calls, ``seqs`` the calls numbered from its first to its last (inclusive).
    """
    calls = run.calls.filter(seq__isnull=False)
    if turn is not None:
        calls = calls.filter(turn=turn)
    if seqs is not None:
        calls = calls.filter(seq__gte=seqs[0], seq__lte=seqs[1])
    rows = calls.order_by("seq").values("id", "seq", "turn", "budget", *USAGE, "analysis")
    out = []
    for row in rows:
        analysis = row.pop("analysis") or {}
        row["buckets"], row["cache"] = analysis.get("buckets"), analysis.get("cache")
        row["url"] = call_url(row["id"])
        out.append(row)
    return out


def manifests(run: Run, up_to_seq: int | None = None) -> Iterable[tuple[int, int | None, list, list, str]]:
    """``(seq, turn, items, excluded, manifest_source)`` per call in seq order, items as stored."""
    calls = run.calls.filter(seq__isnull=False)
    if up_to_seq is not None:
        calls = calls.filter(seq__lte=up_to_seq)
    # "run" too: a related manager sets each call's run from its run id, a query per call if deferred.
    calls = calls.order_by("seq").only("run", "seq", "turn", "item_list", "excluded", "manifest_source")
    return (
        (call.seq, call.turn, call.items, call.excluded, call.manifest_source)
        for call in calls.iterator(chunk_size=200)
    )


def context_edits(run: Run) -> dict[int, list[dict]]:
    """Per call seq, the context edits applied before the model saw it (only calls that report one)."""
    rows = (
        run.calls.filter(seq__isnull=False)
        .annotate(raw_text=Cast("usage_raw", TextField()))
        .filter(raw_text__contains=CONTEXT_EDITS)
        .values_list("seq", "usage_raw")
    )
    return {seq: read_context_edits(raw) for seq, raw in rows}


def findings(run: Run, **filters) -> list[dict]:
    """The run's findings as dicts (call-level in call order, run-level last), with the call's url;
    ``filters`` (``item_id=...``, ``call_seq__in=...``) keep some of them, in SQL."""
    ids = dict(run.calls.filter(seq__isnull=False).values_list("seq", "id"))
    rows = []
    for finding in run.findings.filter(**filters).order_by("call_seq", "id"):
        row = finding.to_dict()
        row["url"] = call_url(ids[finding.call_seq]) if finding.call_seq in ids else None
        rows.append(row)
    rows.sort(key=lambda row: row["call_seq"] is None)
    return rows


# A note's text is read only this far for the overview (the hover quotes less; the review page has it all).
NOTE_HEAD = 400


def review_marks(run: Run) -> dict[str, list[dict]]:
    """The run's notes (the start of each) and bookmarked calls, with their call's seq and url, for the
    findings timeline. Read on every load of the panel: nothing caches them, so a new note shows at once."""
    notes = []
    rows = (
        Note.objects.filter(run=run)
        .order_by("created_at", "id")
        .values(
            "call_id",
            "item_id",
            "created_at",
            call_seq=F("call__seq"),
            author_name=F("author__username"),
            head=Substr("body", 1, NOTE_HEAD),
        )
    )
    for row in rows:
        notes.append(
            {
                "call_seq": row["call_seq"],
                "url": call_url(row["call_id"]) if row["call_id"] else None,
                "item_id": row["item_id"] or None,
                "item_url": item_url(run.id, row["item_id"]) if row["item_id"] else None,
                "author": row["author_name"],
                "created_at": row["created_at"],
                "body": row["head"],
            }
        )
    bookmarks = [
        {
            "call_seq": row["call__seq"],
            "url": call_url(row["call_id"]),
            "author": row["created_by__username"],
            "created_at": row["created_at"],
        }
        for row in Bookmark.objects.filter(call__run=run)
        .order_by("call__seq")
        .values("call_id", "call__seq", "created_by__username", "created_at")
    ]
    return {"notes": notes, "bookmarks": bookmarks}


def review_summary(run: Run) -> dict:
    """What the overview's header shows of the review: the labels, and how many notes and bookmarks."""
    return {
        "labels": list(run.labels.order_by("name").values("name", "link")),
        "notes": run.review_notes.count(),
        "bookmarks": Bookmark.objects.filter(call__run=run).count(),
    }


def cache_breaks(run_ids: Iterable[int], cause: str | None = None) -> dict[int, list[dict]]:
    """The cache breaks of some runs (of one cause, if given) in call order, per run, as the cache
    panel's ``by_cause`` reads them: seq, url, cause, tokens written again, cost (None when unknown).

    The analysis is stored packed (ingest/compact.py), so it is read here, not filtered in SQL."""
    calls = Call.objects.filter(run_id__in=list(run_ids), seq__isnull=False, analysis__isnull=False)
    breaks: dict[int, list[dict]] = {}
    for run_id, call_id, seq, analysis in (
        calls.order_by("run_id", "seq").values_list("run_id", "id", "seq", "analysis").iterator()
    ):
        entry = (analysis or {}).get("cache") or {}
        if not entry.get("broke") or (cause is not None and entry.get("cause") != cause):
            continue
        breaks.setdefault(run_id, []).append(
            {
                "seq": seq,
                "url": call_url(call_id),
                "cause": entry.get("cause"),
                "tokens_rewritten": entry.get("tokens_rewritten") or 0,
                "cost_usd": entry.get("cost_usd"),
            }
        )
    return breaks


def first_breaks(causes: dict[int, str]) -> dict[int, dict]:
    """Per run, the first call its cache broke with the cause ``causes`` names for it (its id, seq and
    url), from the findings: the first break of a cause always starts a finding of that cause."""
    if not causes:
        return {}
    wanted = Q()
    for run_id, cause in causes.items():
        wanted |= Q(run_id=run_id, cause=cause)
    firsts = dict(
        Finding.objects.filter(wanted, type__in=CACHE_FINDINGS, call_seq__isnull=False)
        .values("run_id")
        .annotate(first=Min("call_seq"))
        .values_list("run_id", "first")
    )
    calls = Call.objects.filter(run_id__in=list(firsts), seq__in=set(firsts.values()))
    return {
        run_id: {"id": call_id, "seq": seq, "url": call_url(call_id)}
        for run_id, seq, call_id in calls.values_list("run_id", "seq", "id")
        if firsts[run_id] == seq
    }


def call_marks(run: Run, seqs: tuple[int, int]) -> dict[int, dict]:
    """Notes and bookmark per call, for the calls numbered ``seqs[0]`` to ``seqs[1]`` that have any (one
    query for the whole page of calls)."""
    notes = (
        Note.objects.filter(call=OuterRef("pk")).order_by().values("call").annotate(n=Count("id")).values("n")
    )
    rows = (
        run.calls.filter(seq__gte=seqs[0], seq__lte=seqs[1])
        .annotate(
            note_count=Coalesce(Subquery(notes, output_field=IntegerField()), 0),
            bookmarked=Exists(Bookmark.objects.filter(call=OuterRef("pk"))),
        )
        .filter(Q(note_count__gt=0) | Q(bookmarked=True))
        .values_list("seq", "note_count", "bookmarked")
    )
    return {seq: {"notes": count, "bookmarked": bookmarked} for seq, count, bookmarked in rows}


def flagged_items(run: Run) -> set[str]:
    """Items named by the run's findings about content (dropped, conflicting, lost in the middle...):
    they come first in the presence map. Cache breaks are left out: a long run names an invalidator on
    almost every call, and those rows would crowd out the window itself."""
    return set(
        run.findings.exclude(item_id="")
        .exclude(type__in=("cache_invalidated", "invisible_invalidator"))
        .values_list("item_id", flat=True)
        .distinct()
    )


def presence_index(run: Run, build) -> dict:
    """``build(manifests(run))``, cached until the run changes (a new call, a finished analysis).

    Reading every manifest of a long run is the overview's one heavy read; the index is small and
    the key changes whenever the run does, so a stale index is never served.
    """
    key = f"cv:presence:{run.id}:{run.call_count}:{run.analysed_seq}:{run.updated_at.timestamp()}"
    built = cache.get(key)
    if built is None:
        built = build(manifests(run))
        cache.set(key, built, timeout=600)
    return built


def finding_counts(run_ids: list[int]) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {run_id: {} for run_id in run_ids}
    rows = Finding.objects.filter(run_id__in=run_ids).values_list("run_id", "type").annotate(n=Count("id"))
    for run_id, finding_type, count in rows:
        counts[run_id][finding_type] = count
    return counts


def call_dict(call: Call) -> dict:
    """One call as the pure code reads it: items expanded with their position, usage, analysis."""
    return {
        "id": call.id,
        "seq": call.seq,
        "turn": call.turn,
        "model": call.model,
        "items": call.full_items(),
        "excluded": call.excluded,
        "budget": call.budget,
        "usage": call.usage_dict(),
        "analysis": call.analysis,
        "manifest_source": call.manifest_source,
        "url": call_url(call.id),
    }


def calls_by_seq(run: Run, seqs: Iterable[int]) -> dict[int, dict]:
    """Some calls of a run, by seq, as ``call_dict``s."""
    return {call.seq: call_dict(call) for call in run.calls.filter(seq__in=list(seqs))}


def tool_executions(run: Run, seq: int | None = None) -> list[dict]:
    """The run's tool executions in start order, one per execution however many spans tell of it
    (``ingest.tool_executions``), each with the seq of the call that asked for it (by its tool call id,
    else null); ``seq``: only the executions that call asked for."""
    calls = run.calls.filter(seq__isnull=False)
    if seq is not None:
        calls = calls.filter(seq=seq)
    asked, traces = {}, set()
    for call_seq, trace_id, tool_calls in calls.values_list("seq", "trace_id", "tool_calls"):
        traces.add(trace_id)
        for tool_call in tool_calls or ():
            if isinstance(tool_call, dict) and tool_call.get("id"):
                asked.setdefault(str(tool_call["id"]), call_seq)
    found = [
        {**execution, "call_seq": asked.get(execution["call_id"] or "")}
        for execution in trace_tool_executions(run.project_id, traces)
    ]
    return [execution for execution in found if seq is None or execution["call_seq"] == seq]


def trace_tool_executions(project_id: int, traces: set[str]) -> list[dict]:
    """The tool executions of these traces, in start order (the rule: ``ingest.tool_executions``)."""
    if not traces:
        return []
    tools: dict[str, list[ToolSpan]] = {}
    stops: dict[str, set[str]] = {}
    fields = ("span_id", "parent_span_id", "name", "start_ns", "end_ns", "call_id", "arguments_bytes")
    rows = Operation.objects.filter(project_id=project_id, trace_id__any_of=traces).values_list(
        "trace_id", "kind", *fields, "result_bytes", "details"
    )
    for trace_id, kind, *values, result, details in rows:
        if kind == Operation.Kind.AGENT:
            stops.setdefault(trace_id, set()).add(values[0])
        else:
            tools.setdefault(trace_id, []).append(
                ToolSpan(*values, result_bytes=result, details=details or {})
            )
    # Spans of one execution run the same tool: only a trace where a tool name comes twice needs the
    # spans between them (its stored span links) and its model calls (an execution never spans one).
    nested = {
        trace_id
        for trace_id, spans in tools.items()
        if len({span.name.strip().casefold() for span in spans}) < len(spans)
    }
    links: dict[str, dict[str, str]] = {}
    if nested:
        for trace_id, span_id, parent in Span.objects.filter(
            project_id=project_id, trace_id__any_of=nested
        ).values_list("trace_id", "span_id", "parent_span_id"):
            links.setdefault(trace_id, {})[span_id] = parent
        for trace_id, span_id in Call.objects.filter(
            project_id=project_id, trace_id__any_of=nested
        ).values_list("trace_id", "span_id"):
            stops.setdefault(trace_id, set()).add(span_id)
    found: list[tuple[tuple, dict]] = []
    for trace_id, spans in tools.items():
        for execution in executions(spans, links.get(trace_id, {}), stops.get(trace_id, set())):
            key = (execution.start_ns, trace_id, execution.span_id)
            found.append(
                (
                    key,
                    {
                        "name": execution.name,
                        "call_id": execution.call_id or None,
                        "trace_id": trace_id,
                        "span_id": execution.span_id,
                        "started_at": datetime.fromtimestamp(execution.start_ns / 1e9, tz=UTC).isoformat(),
                        "duration_ms": round((execution.end_ns - execution.start_ns) / 1e6, 3),
                        "arguments_bytes": execution.arguments_bytes,
                        "result_bytes": execution.result_bytes,
                        "details": execution.details,
                        "spans": list(execution.spans),
                    },
                )
            )
    return [execution for _, execution in sorted(found, key=lambda pair: pair[0])]


def contents(project_id: int, hashes: Iterable[str]) -> dict[str, str]:
    """Stored item content by hash (only what exists: content may not have been captured)."""
    return dict(Content.objects.by_hash(project_id, hashes, "text"))


def last_call_of_turn(run: Run, turn: int) -> Call | None:
    return run.calls.filter(turn=turn, seq__isnull=False).order_by("-seq").first()


# --- The runs list -------------------------------------------------------------------------------


def run_choices(project: Project) -> dict[str, list[str]]:
    """The services, models and finding types the project's runs have (the filters' options)."""
    runs = project.runs.filter(started_at__isnull=False)
    services = sorted(set(runs.values_list("service_name", flat=True)) - {""})
    models: set[str] = set()
    for names in runs.values_list("model_names", flat=True):
        models.update(name for name in names or () if name)
    types = sorted(set(Finding.objects.filter(project=project).values_list("type", flat=True).distinct()))
    labels = sorted(set(Label.objects.filter(project=project).values_list("name", flat=True)))
    return {"services": services, "models": sorted(models), "finding_types": types, "labels": labels}


def _sort_expression(key: str):
    return {
        "started": F("started_at"),
        "calls": F("call_count"),
        "turns": F("turn_count"),
        "peak": F("peak_window"),
        "hit_rate": Cast(KT("accounting__cache_hit_rate"), FloatField()),
        "billed": F("prompt_total"),
        "cost": Cast(KT("accounting__cost_usd__with_cache"), FloatField()),
        "findings": F("finding_total"),
    }[key]


def runs(project: Project, filters: dict) -> QuerySet[Run]:
    """The project's runs with their peak window and findings count, searched (``filters`` holds the
    search's terms) and sorted."""
    peak = (
        Call.objects.filter(run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(peak=Coalesce(Max("prompt_total"), Max("window_total")))
        .values("peak")
    )
    findings = (
        Finding.objects.filter(run=OuterRef("pk"))
        .order_by()
        .values("run")
        .annotate(n=Count("id"))
        .values("n")
    )
    queryset = search_runs([project.id], filters).annotate(
        peak_window=Subquery(peak), finding_total=Subquery(findings)
    )
    key = filters["sort"].lstrip("-")
    expression = _sort_expression(key)
    ordering = (
        expression.desc(nulls_last=True)
        if filters["sort"].startswith("-")
        else expression.asc(nulls_last=True)
    )
    return queryset.order_by(ordering, "-id")


def agent_rows(run: Run) -> dict:
    """The run's calls as the agents panel reads them, the items of each invocation's first call (its
    packet), and the project's prices (model -> Price)."""
    fields = ("seq", "agent_name", "agent_invocation", "parent_invocation", "agent_entry", "agent_depth")
    rows = []
    first: dict[str, int] = {}
    for values in (
        run.calls.filter(seq__isnull=False)
        .order_by("seq")
        .values_list(*fields, "request_model", "response_model", "usage_raw", *Run.USAGE_FIELDS)
    ):
        seq, agent, invocation, parent, entered, depth, request_model, response_model, raw = values[:9]
        rows.append(
            {
                "seq": seq,
                "agent": agent or None,
                "invocation": invocation or None,
                "parent": parent or None,
                "entered": entered or None,
                "depth": depth,
                "model": response_model or request_model,
                "usage_raw": raw,
                "usage": dict(zip(Run.USAGE_FIELDS, values[9:], strict=True)),
            }
        )
        if invocation:
            first.setdefault(invocation, seq)
    wanted = {seq: invocation for invocation, seq in first.items()}
    items = {
        wanted[call.seq]: call.full_items()
        for call in run.calls.filter(seq__in=list(wanted)).only("run", "seq", "item_list")
    }
    return {
        "rows": rows,
        "first_items": items,
        "groups": agent_groups([run.id])[run.id],
        "prices": prices_of(run.project),
    }


def agent_groups(run_ids: list[int]) -> dict[int, list[dict]]:
    """Per run, its usage summed by agent and model, in one query (shaped by ``agents.agent_totals``)."""
    found: dict[int, list[dict]] = {run_id: [] for run_id in run_ids}
    one_hour = _one_hour_writes(run_ids)
    sums = {f"sum_{name}": Sum(name) for name in Run.USAGE_FIELDS}
    known = {f"known_{name}": Count(name) for name in Run.USAGE_FIELDS}
    rows = (
        Call.objects.filter(run_id__in=run_ids)
        .exclude(agent_name="")
        .values("run_id", "agent_name", "request_model", "response_model")
        .annotate(calls=Count("id"), **sums, **known)
        .order_by("run_id", "agent_name", "request_model", "response_model")
    )
    for row in rows:
        found[row["run_id"]].append(
            {
                "agent": row["agent_name"],
                "model": row["response_model"] or row["request_model"],
                "calls": row["calls"],
                "usage": {name: row[f"sum_{name}"] for name in Run.USAGE_FIELDS},
                "unknown": {
                    name: row["calls"] - row[f"known_{name}"]
                    for name in Run.USAGE_FIELDS
                    if row["calls"] > row[f"known_{name}"]
                },
                "cache_write_1h": one_hour.get(
                    (row["run_id"], row["agent_name"], row["request_model"], row["response_model"]), 0
                ),
            }
        )
    return found


def _one_hour_writes(run_ids: list[int]) -> dict[tuple, int]:
    """Per (run, agent, request model, response model): the cache writes that went to the 1-hour cache.

    Only calls whose reported usage names a 1-hour figure are read (its key differs per family, so the
    sum is taken here rather than in SQL)."""
    sums: dict[tuple, int] = {}
    rows = (
        Call.objects.filter(run_id__in=run_ids)
        .exclude(agent_name="")
        .annotate(raw_text=Cast("usage_raw", TextField()))
        .filter(raw_text__contains="ephemeral_1h")
        .values_list("run_id", "agent_name", "request_model", "response_model", "usage_raw")
    )
    for run_id, agent, request_model, response_model, raw in rows:
        key = (run_id, agent, request_model, response_model)
        sums[key] = sums.get(key, 0) + one_hour_tokens(raw)
    return sums


def prices_of(project: Project):
    """The project's prices as a lookup: model -> ``Price`` or None."""
    from ctxcore.analysis import price_for
    from ingest.analyse import config_for

    table = config_for(project).prices
    return lambda model: price_for(model, table)


def most_recently_active(projects: QuerySet[Project]) -> Project | None:
    """Of ``projects``, the one whose latest run was updated last (one without runs only if none has any)."""
    return (
        projects.annotate(active_at=Max("runs__updated_at"))
        .order_by(F("active_at").desc(nulls_last=True), "slug")
        .first()
    )
