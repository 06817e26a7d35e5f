"""Finding runs by what their context windows held: an item's id, source, version or content hash.

"Which runs had the old billing.ts in the window?" is ``runs_with_item(projects, {"source":
"src/api/billing.ts", "version": "v1"})``. Used by the read API and the runs list.
"""

from django.db import connection
from django.db.models import Min, QuerySet

from ingest.models import Call

# Query parameter -> the item field it matches.
ITEM_FILTERS = {"item": "id", "source": "source", "version": "version", "hash": "hash"}


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
