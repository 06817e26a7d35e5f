"""The runs search, the runs page's and the API's: runs by service, model, finding, label, start time and
what their context windows held (an item's id, source, version or content hash).

"Which runs had the old billing.ts in the window?" is ``runs_with_item(projects, {"source":
"src/api/billing.ts", "version": "v1"})``. The terms come from ``ctxview.shapes.runs.search_terms``.
"""

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet

from ingest.itemlists import first_seqs_holding, runs_holding
from ingest.models import Call, Finding, Run


def search_runs(project_ids: Iterable[int] | QuerySet, terms: dict) -> QuerySet[Run]:
    """The started runs of the projects that match every term given (an empty term matches all)."""
    runs = Run.objects.filter(project_id__in=project_ids, started_at__isnull=False)
    if terms["service"]:
        runs = runs.filter(service_name=terms["service"])
    if terms["model"]:
        model = terms["model"]
        # Request or response model: Run.model_names keeps only one of them per call.
        calls = Call.objects.filter(run=OuterRef("pk")).filter(
            Q(response_model=model) | Q(request_model=model)
        )
        runs = runs.filter(Exists(calls))
    if terms["finding"]:
        runs = runs.filter(Exists(Finding.objects.filter(run=OuterRef("pk"), type=terms["finding"])))
    if terms["label"]:
        runs = runs.filter(labels__name=terms["label"])
    if terms["held"]:
        runs = runs.filter(id__in=runs_with_item(project_ids, terms["held"]))
    return started_between(runs, terms["since"], terms["until"])


def started_between(runs: QuerySet[Run], since: datetime | None, until: datetime | None) -> QuerySet[Run]:
    """Runs started at or after ``since`` and before ``until``."""
    if since:
        runs = runs.filter(started_at__gte=since)
    if until:
        runs = runs.filter(started_at__lt=until)
    return runs


def runs_with_item(project_ids, wanted: dict[str, str]) -> list[int]:
    """Runs with a call whose window held an item matching every field in ``wanted``."""
    if isinstance(project_ids, QuerySet):
        # The projects a user may read, as a query (of rows or of ids): their ids, for one array parameter.
        project_ids = project_ids.values_list("id", flat=True)
    return runs_holding(list(project_ids), wanted)


def _matches(item: dict, wanted: dict[str, str]) -> bool:
    return all(item.get(field) == value for field, value in wanted.items())


def first_calls_holding(run_ids: list[int], wanted: dict[str, str]) -> dict[int, dict]:
    """Per run, its first call whose window held an item matching ``wanted``: the call's id and seq, and
    the matching item's id (the runs list links a filtered run straight to that call)."""
    firsts = first_seqs_holding(run_ids, wanted)
    calls = Call.objects.filter(run_id__in=list(firsts), seq__in=set(firsts.values()))
    found: dict[int, dict] = {}
    for call in calls.only("id", "run_id", "seq", "item_list"):
        if firsts.get(call.run_id) != call.seq:
            continue
        item = next((item for item in call.items if _matches(item, wanted)), None)
        if item is not None:
            found[call.run_id] = {"call_id": call.id, "seq": call.seq, "item_id": item.get("id")}
    return found
