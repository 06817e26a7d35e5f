"""Finding runs by what their context windows held: an item's id, source, version or content hash.

"Which runs had the old billing.ts in the window?" is ``runs_with_item(projects, {"source":
"src/api/billing.ts", "version": "v1"})``. Used by the read API and the runs list.
"""

from django.db import connection
from django.db.models import QuerySet

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
            if any(all(item.get(field) == value for field, value in wanted.items()) for item in items)
        }
    )
