"""Export a run as one JSON document, and import such a document into a project.

The document (format "ctxview.run-export", version 1; schema: schemas/run-export-v1.schema.json, checked
by ``ingest.export_format`` before an import writes anything) holds the
run, its calls with usage and manifests, the content of their items (unless the project is hash-only),
the findings and accounting as they were, and the notes, labels and bookmarks. An import recreates the
run and its calls as exported (through ``ingest.imports``) and a task analyses them again, so the target
shows the same screens and findings.
"""

import csv
import io

from django.db import transaction
from django.utils import timezone

from ctxcore.analysis import accounting
from ctxcore.analysis.limits import one_hour_tokens
from ctxcore.vocabulary import Usage
from ctxview import queries
from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.untrusted import csv_cell
from ingest import imports
from ingest.export_format import FORMAT, VERSION, moment
from ingest.imports import AlreadyImported, ImportError_
from ingest.models import Call, Content, Project, Run

__all__ = ["FORMAT", "VERSION", "AlreadyImported", "ImportError_", "export_run", "import_run", "calls_csv"]

NOTE_FIELDS = ("call_seq", "item_id", "author", "body", "created_at", "updated_at", "revisions")
USAGE_FIELDS = Run.USAGE_FIELDS


def export_run(run: Run) -> dict:
    calls = list(run.calls.filter(seq__isnull=False).order_by("seq"))
    hashes = {item["hash"] for call in calls for item in call.items}
    contents = {}
    if not run.project.hash_only:
        for row in Content.objects.filter(project_id=run.project_id, hash__in=hashes):
            contents[row.hash] = {"text": row.text, "truncated": row.truncated}
    notes = run.review_notes.select_related("author", "call").prefetch_related("revisions__editor")
    return {
        "format": FORMAT,
        "version": VERSION,
        "exported_at": timezone.now().isoformat(),
        "source": {"project": run.project.slug, "run_id": run.id},
        "run": run.to_export(),
        "calls": [call.to_export() for call in calls],
        "contents": contents,
        "findings": [finding.to_dict() for finding in run.findings.order_by("call_seq", "id")],
        "accounting": run.accounting,
        "notes": [_exported_note(note.to_dict()) for note in notes],
        "labels": [label.to_dict() for label in run.labels.order_by("name")],
        "bookmarks": list(
            Bookmark.objects.filter(call__run=run, call__seq__isnull=False)
            .order_by("call__seq")
            .values_list("call__seq", flat=True)
        ),
    }


def _exported_note(note: dict) -> dict:
    """A note as the API serves it, less its ids in this database (a note refers to its call by seq)."""
    return {name: note[name] for name in NOTE_FIELDS}


def import_run(project: Project, document: dict, user=None) -> Run:
    """Create the exported run in ``project`` through the write side (its key gets a suffix if taken), with
    its notes, labels and bookmarks, in one transaction; its analysis is enqueued when that commits."""
    with transaction.atomic():
        run, calls = imports.store_run(project, document)
        _import_review(project, run, calls, document, user)
    return run


def _import_review(project: Project, run: Run, calls: list[Call], document: dict, user) -> None:
    by_seq = {call.seq: call for call in calls}
    for entry in document.get("notes", []):
        note = Note.objects.create(
            project=project,
            run=run,
            call=by_seq.get(entry.get("call_seq")),
            item_id=entry.get("item_id") or "",
            author=user,
            body=f"{entry['body']}\n\n(imported; written by {entry.get('author') or 'unknown'})",
            created_at=moment(entry["created_at"]),
            updated_at=moment(entry.get("updated_at") or entry["created_at"]),
        )
        NoteRevision.objects.bulk_create(
            [
                NoteRevision(note=note, body=revision["body"], edited_at=moment(revision["edited_at"]))
                for revision in entry.get("revisions", [])
            ]
        )
    labels = document.get("labels", [])
    Label.objects.bulk_create(
        [
            Label(
                project=project,
                run=run,
                name=label["name"].lower(),  # as the label API stores it
                link=(label.get("link") or "")[:500],
                created_by=user,
            )
            for label in labels
        ],
        ignore_conflicts=True,
    )
    Bookmark.objects.bulk_create(
        [
            Bookmark(project=project, call=by_seq[seq], created_by=user)
            for seq in document.get("bookmarks", [])
            if seq in by_seq
        ],
        ignore_conflicts=True,
    )


def calls_csv(run: Run) -> str:
    """The run's calls with usage and cost, one row per call, for spreadsheets. ``cost_usd`` is the call
    as billed at the project's prices (empty when unknown), ``cost_basis`` says why it is what it is."""
    price_of = queries.prices_of(run.project)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "seq",
            "turn",
            "started_at",
            "model",
            "provider",
            *USAGE_FIELDS,
            "cost_usd",
            "cost_basis",
            "items",
            "content_captured",
            "cache_cause",
            "invalidator",
            "trace_id",
            "span_id",
        ]
    )
    for call in run.calls.filter(seq__isnull=False).order_by("seq").iterator():
        cache = (call.analysis or {}).get("cache") or {}
        # Model names, providers and item ids come from traces: never let a spreadsheet run them.
        row = [
            call.seq,
            call.turn,
            call.started_at.isoformat(),
            call.model,
            call.provider,
            *("" if getattr(call, name) is None else getattr(call, name) for name in USAGE_FIELDS),
            *_cost_cells(call, price_of(call.model)),
            len(call.items),
            call.content_captured,
            cache.get("cause") or "",
            cache.get("invalidator_item_id") or "",
            call.trace_id,
            call.span_id,
        ]
        writer.writerow([csv_cell(cell) for cell in row])
    return out.getvalue()


def _cost_cells(call: Call, price) -> tuple[str | float, str]:
    """The call's cost as billed, and its basis: the price used, or why there is no figure."""
    if price is None:
        return "", f"no price for {call.model or 'an unnamed model'}"
    usage = Usage.from_dict(call.usage_dict())
    cost = accounting.usage_cost(usage, one_hour_tokens(call.usage_raw), price)
    if cost is None:
        figures = ("uncached", "cache_write", "cache_read", "output")
        missing = [name for name in figures if getattr(usage, name) is None]
        return "", f"{', '.join(missing)} not reported"
    return round(cost[0], 6), f"{call.model} at the project's prices"
