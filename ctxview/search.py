"""Finding runs by what their context windows held: an item's id, source, version or content hash.

"Which runs had the old billing.ts in the window?" is ``runs_with_item(projects, {"source":
"src/api/billing.ts", "version": "v1"})``. Used by the read API and the runs list.
"""

from ingest.itemlists import runs_holding

# Query parameter -> the item field it matches.
ITEM_FILTERS = {"item": "id", "source": "source", "version": "version", "hash": "hash"}


def runs_with_item(project_ids, wanted: dict[str, str]) -> list[int]:
    """Runs with a call whose window held an item matching every field in ``wanted``."""
    return runs_holding(project_ids, wanted)
