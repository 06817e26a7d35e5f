"""The JSON read API under /api/v1/ (described by /api/v1/openapi.json). Errors are JSON with a
one-line message; another project's data is a 404."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.db.models import QuerySet
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from ctxcore import analysis, catalogue
from ctxview.api_common import api_view, error, get_run, int_query
from ctxview.panels import agents as agents_panel
from ctxview.params import BadParameter, time_param
from ctxview.queries import (
    agent_groups,
    agent_rows,
    context_edits,
    finding_counts,
    manifests,
    prices_of,
    tool_executions,
)
from ctxview.search import search_runs
from ctxview.shapes.runs import search_terms
from ingest import export_format
from ingest.models import Call, Content, Project, Run, Span

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
CONTENT_LIMIT = 65_536
MAX_CONTENT_LIMIT = 262_144
MAX_SEQ = 2**31 - 1  # a call's seq is a 32-bit integer; openapi.json says the same


def _with_catalogue_enums(document: dict) -> dict:
    """The OpenAPI description with the finding types, causes and severities of ``ctxcore.catalogue``."""
    schemas = document["components"]["schemas"]
    causes = {"type": ["string", "null"], "enum": [*catalogue.CAUSES, None]}
    schemas["Finding"]["properties"]["type"]["enum"] = list(catalogue.FINDING_TYPES)
    schemas["Finding"]["properties"]["severity"]["enum"] = list(catalogue.SEVERITIES)
    schemas["Finding"]["properties"]["cause"].update(causes)
    schemas["Call"]["properties"]["cache"]["properties"]["cause"].update(causes)
    return document


OPENAPI = _with_catalogue_enums(json.loads((Path(__file__).parent / "openapi.json").read_text()))


def _next_url(request: HttpRequest, **params) -> str:
    query = request.GET.copy()
    for name, value in params.items():
        query[name] = value
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


# --- Serialisers ---------------------------------------------------------------------------------


def run_to_dict(run: Run, request: HttpRequest) -> dict:
    data = run.to_dict(url=request.build_absolute_uri(reverse("cv-run", args=[run.id])))
    data["agents"] = agents_of(run)
    return data


def attach_finding_counts(runs: list[Run]) -> None:
    """Findings by type for a page of runs, in one query (the runs list's)."""
    counts = finding_counts([run.id for run in runs])
    for run in runs:
        run.finding_counts = counts[run.id]


def attach_agent_groups(runs: list[Run]) -> None:
    """Usage by agent and model for a page of runs, in one query (the runs list's)."""
    groups = agent_groups([run.id for run in runs])
    for run in runs:
        run.agent_groups = groups[run.id]


def agents_of(run: Run) -> list[dict]:
    """The run's agents: calls, usage and cost of each."""
    groups = getattr(run, "agent_groups", None)  # prefetched by list views
    if groups is None:
        groups = agent_groups([run.id])[run.id]
    return agents_panel.agent_totals(groups, prices_of(run.project))


def call_to_dict(call: Call, request: HttpRequest, contents: dict[str, Content] | None = None) -> dict:
    return call.to_dict(url=request.build_absolute_uri(reverse("cv-call", args=[call.id])), contents=contents)


# --- Views ---------------------------------------------------------------------------------------


def _runs(projects: QuerySet[Project]) -> QuerySet[Run]:
    return Run.objects.filter(project__in=projects).select_related("project")


@api_view
def runs(request: HttpRequest, projects: QuerySet[Project]) -> JsonResponse:
    """Runs, newest first, searched as on the runs page (``ctxview.search``); ``next`` pages on."""
    limit = int_query(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    if request.GET.get("project"):
        projects = projects.filter(slug=request.GET["project"])
    terms = search_terms(request.GET)
    for name in ("since", "until"):
        terms[name] = time_param(request.GET, name, zone_required=True)
    queryset = search_runs(projects.values("id"), terms).select_related("project")
    # Present but empty is refused, as the schema's pattern says (and as for the other parameters).
    if (cursor := request.GET.get("cursor")) is not None:
        started_at, run_id = _decode_cursor(cursor)
        queryset = queryset.filter(started_at__lte=started_at).exclude(started_at=started_at, id__gte=run_id)
    page = list(queryset.order_by("-started_at", "-id")[: limit + 1])
    next_url = None
    if len(page) > limit:
        page = page[:limit]
        last = page[-1]
        next_url = _next_url(request, cursor=_encode_cursor(last.started_at, last.id))
    attach_finding_counts(page)
    attach_agent_groups(page)
    return JsonResponse({"runs": [run_to_dict(run, request) for run in page], "next": next_url})


_CURSOR = re.compile(r"^([0-9]{1,18})_([0-9]{1,18})$")  # openapi.json has the same pattern
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _encode_cursor(started_at: datetime, run_id: int) -> str:
    """The last run of a page: its start in microseconds since 1970 and its id. Any value of this shape
    is a valid place to continue from, so what the schema allows the API takes."""
    return f"{(started_at - _EPOCH) // timedelta(microseconds=1)}_{run_id}"


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    found = _CURSOR.match(cursor)
    if found is None:
        raise BadParameter("cursor is not one this API gave out (it is the 'next' link's)")
    micros, run_id = int(found.group(1)), int(found.group(2))
    try:
        return _EPOCH + timedelta(microseconds=micros), run_id
    except OverflowError:  # beyond year 9999: after every run
        return datetime.max.replace(tzinfo=UTC), run_id


@api_view
def run_detail(request: HttpRequest, projects: QuerySet[Project], run_id: int) -> JsonResponse:
    run = get_run(projects, run_id)
    if run is None:
        return error("no such run", 404)
    data = agent_rows(run)
    invocations = agents_panel.invocations(data["rows"], data["first_items"], data["prices"])
    return JsonResponse(
        {**run_to_dict(run, request), "invocations": invocations, "tool_executions": tool_executions(run)}
    )


@api_view
def run_calls(request: HttpRequest, projects: QuerySet[Project], run_id: int) -> JsonResponse:
    """The run's calls in seq order; ``next`` pages on."""
    run = get_run(projects, run_id)
    if run is None:
        return error("no such run", 404)
    limit = int_query(request, "limit", 100, 1, MAX_LIMIT)
    after = int_query(request, "after_seq", 0, 0, MAX_SEQ)
    page = list(run.calls.filter(seq__gt=after).order_by("seq")[: limit + 1])
    next_url = None
    if len(page) > limit:
        page = page[:limit]
        next_url = _next_url(request, after_seq=page[-1].seq)
    return JsonResponse({"calls": [call_to_dict(call, request) for call in page], "next": next_url})


@api_view
def call_detail(request: HttpRequest, projects: QuerySet[Project], call_id: int) -> JsonResponse:
    """One call; ``?content=1`` adds each item's content, cut to ``content_limit`` characters."""
    call = Call.objects.filter(project__in=projects, id=call_id).first()
    if call is None:
        return error("no such call", 404)
    contents = None
    # Checked whether or not content is asked for: a wrong value is a mistake either way.
    limit = int_query(request, "content_limit", CONTENT_LIMIT, 1, MAX_CONTENT_LIMIT)
    if request.GET.get("content", "0") not in ("0", "1", "true"):
        raise BadParameter("content must be 0, 1 or true")
    if request.GET.get("content") in ("1", "true"):
        found = Content.objects.by_hash(
            call.project_id, [item["hash"] for item in call.items], "text", "truncated"
        )
        contents = {}
        for row in (Content(hash=value, text=text, truncated=truncated) for value, text, truncated in found):
            if len(row.text) > limit:
                row.text, row.truncated = row.text[:limit], True
            contents[row.hash] = row
    return JsonResponse(call_to_dict(call, request, contents))


@api_view
def run_findings(request: HttpRequest, projects: QuerySet[Project], run_id: int) -> JsonResponse:
    """The run's findings in call order (run-level ones last); ``?type=`` filters."""
    run = get_run(projects, run_id)
    if run is None:
        return error("no such run", 404)
    findings = run.findings.all()
    if request.GET.get("type"):
        findings = findings.filter(type=request.GET["type"])
    ordered = sorted(
        findings, key=lambda finding: (finding.call_seq is None, finding.call_seq or 0, finding.id)
    )
    return JsonResponse({"findings": [finding.to_dict() for finding in ordered]})


@api_view
def item_lifecycle(
    request: HttpRequest, projects: QuerySet[Project], run_id: int, item_id: str
) -> JsonResponse:
    """One item across the run: where it was included, excluded, and when it left."""
    run = get_run(projects, run_id)
    if run is None:
        return error("no such run", 404)
    # Stored items (defaults left out) are what item_lifecycle reads, as on the item page: expanding
    # every item of a long run first would only cost time.
    calls = ((seq, items, excluded, source) for seq, _turn, items, excluded, source in manifests(run))
    edits = context_edits(run)
    lifecycle = analysis.item_lifecycle(item_id, (row + (edits.get(row[0], ()),) for row in calls))
    if lifecycle["first_seq"] is None and not lifecycle["excluded"]:
        return error("no such item in this run", 404)
    return JsonResponse(lifecycle)


@api_view
def trace_spans(request: HttpRequest, projects: QuerySet[Project], trace_id: str) -> JsonResponse:
    """The stored spans of one trace, in start order."""
    trace_id = trace_id.lower()
    if not _TRACE_ID.match(trace_id):
        raise BadParameter("trace id must be 32 hex characters")
    spans = (
        Span.objects.filter(project__in=projects, trace_id=trace_id)
        .select_related("resource")
        .order_by("start_time_unix_nano", "span_id")
    )
    rows = [span.to_dict() for span in spans]
    if not rows:
        return error("no such trace", 404)
    return JsonResponse({"trace_id": trace_id, "spans": rows})


@csrf_exempt  # it writes nothing: a POST to a wrong path is told the path is wrong, not about CSRF
def not_found(request: HttpRequest, rest: str) -> JsonResponse:
    """Any other path under /api/, by any method: a JSON 404 (API clients parse the body), not an HTML
    page (Django's 405, or its CSRF 403 for a POST)."""
    return error("no such API endpoint; the endpoints are listed in /api/v1/openapi.json", 404)


def openapi(request: HttpRequest) -> JsonResponse:
    return JsonResponse(OPENAPI)


@require_GET
def run_export_schema(request: HttpRequest) -> JsonResponse:
    """The JSON Schema of a run export: what an import accepts (public, as the OpenAPI document is)."""
    return JsonResponse(export_format.schema())
