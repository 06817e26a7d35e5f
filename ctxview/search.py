"""The runs search, the runs page's and the API's: runs by service, model, finding, label, start time and
what their context windows held (an item's id, source, version or content hash).

"Which runs had the old billing.ts in the window?" is ``runs_with_item(projects, {"source":
"src/api/billing.ts", "version": "v1"})``. The terms come from ``ctxview.shapes.runs.search_terms``.
"""

from collections.abc import Iterable
from datetime import datetime

from django.db import connection
from django.db.models import Exists, Min, OuterRef, Q, QuerySet

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


def runs_with_item(project_ids, wanted: dict[str, str]) -> list[int] | QuerySet:
    """Runs with a call whose window held an item matching every field in ``wanted``."""
    calls = Call.objects.filter(project_id__in=project_ids)
    if connection.vendor == "postgresql":
        # A containment test the GIN index on Call.items answers (migration ingest 0005).
        return calls.filter(items__contains=[wanted]).values("run_id")
    # SQLite (embedded) has no JSON containment: scan, which is fine at a laptop's scale.
    return list(
        {
            run_id
            for run_id, items in calls.values_list("run_id", "items").iterator()
            if any(_matches(item, wanted) for item in items)
        }
    )


def _matches(item: dict, wanted: dict[str, str]) -> bool:
    return all(item.get(field) == value for field, value in wanted.items())


def first_calls_holding(run_ids: list[int], wanted: dict[str, str]) -> dict[int, dict]:
    """Per run, its first call whose window held an item matching ``wanted``: the call's id and seq, and
    the matching item's id (the runs list links a filtered run straight to that call)."""
    calls = Call.objects.filter(run_id__in=run_ids, seq__isnull=False)
    if connection.vendor == "postgresql":
        firsts = calls.filter(items__contains=[wanted]).values("run_id").annotate(first=Min("seq"))
        wanted_seqs = {row["run_id"]: row["first"] for row in firsts}
        rows = [
            (run_id, call_id, seq, items)
            for run_id, call_id, seq, items in calls.filter(seq__in=set(wanted_seqs.values())).values_list(
                "run_id", "id", "seq", "items"
            )
            if wanted_seqs.get(run_id) == seq
        ]
    else:
        rows = calls.order_by("run_id", "seq").values_list("run_id", "id", "seq", "items")
    found: dict[int, dict] = {}
    for run_id, call_id, seq, items in rows:
        if run_id in found:
            continue
        item = next((item for item in items if _matches(item, wanted)), None)
        if item is not None:
            found[run_id] = {"call_id": call_id, "seq": seq, "item_id": item.get("id")}
    return found
