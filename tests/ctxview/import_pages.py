"""What an import must leave: every page of the imported run answering 200; nothing stored on a refusal."""

from urllib.parse import quote

from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.panels import run_panels
from ingest.models import Call, Content, ItemList, Run

STORED = (Run, Call, ItemList, Content, Note, NoteRevision, Label, Bookmark)


def stored_rows() -> dict[str, int]:
    """Row counts of everything an import writes, in every project."""
    return {model.__name__: model.objects.count() for model in STORED}


def pages_of(run: Run) -> list[str]:
    """Every page, partial and API resource of a run (UI and API), with its calls, turns and an item."""
    pages = [
        f"/runs/{run.id}/",
        f"/runs/{run.id}/live",
        *(f"/runs/{run.id}/panels/{slug}" for slug in run_panels()),
        f"/runs/{run.id}/explain",
        *(f"/runs/{run.id}/explain?turn={turn}" for turn in range(1, min(run.turn_count, 3) + 1)),
        f"/runs/{run.id}/replay",
        f"/runs/{run.id}/compare",
        f"/runs/{run.id}/review",
        f"/api/v1/runs/{run.id}",
        f"/api/v1/runs/{run.id}/calls",
        f"/api/v1/runs/{run.id}/findings",
        f"/api/v1/runs/{run.id}/export",
        f"/api/v1/runs/{run.id}/calls.csv",
        f"/api/v1/runs/{run.id}/replay",
    ]
    for call in run.calls.order_by("seq"):
        pages += [f"/calls/{call.id}/", f"/calls/{call.id}/?all=1", f"/api/v1/calls/{call.id}?content=1"]
        if call.items:
            pages.append(f"/calls/{call.id}/content?pos=0")
    calls = list(run.calls.order_by("seq"))
    items = sorted({item["id"] for call in calls for item in call.items})
    for item_id in items[:2]:
        pages += [
            f"/runs/{run.id}/item?id={quote(item_id)}",
            f"/api/v1/runs/{run.id}/items/{quote(item_id, safe='')}",
        ]
    # The diff of an item between the two calls the compare page opens on (the last two): one in both.
    if len(calls) >= 2:
        both = sorted({i["id"] for i in calls[-2].items} & {i["id"] for i in calls[-1].items})
        pages += [f"/runs/{run.id}/compare/item?item={quote(item_id)}" for item_id in both[:2]]
    return pages


def broken_pages(client, run: Run) -> list[tuple[str, int]]:
    """The pages of ``run`` that do not answer 200 (``client`` is logged in as a reader of its project)."""
    broken = []
    for page in pages_of(run):
        status = client.get(page).status_code
        if status != 200:
            broken.append((page, status))
    return broken
