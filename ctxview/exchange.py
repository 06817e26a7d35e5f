"""Export a run as one JSON document, and import such a document into a project.

The document (format "ctxview.run-export", version 1; schema: schemas/run-export-v1.schema.json) holds the
run, its calls with usage and manifests, the content of their items (unless the project is hash-only),
the findings and accounting as they were, and the notes, labels and bookmarks. An import recreates the
run and its calls as exported (through ``ingest.imports``) and a task analyses them again, so the target
shows the same screens and findings.
"""

import csv
import io
from datetime import datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.untrusted import csv_cell
from ingest import imports
from ingest.imports import FORMAT, VERSION, AlreadyImported, ImportError_, require
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


def _time(value, where: str) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    require(parsed is not None, f"{where} must be an ISO 8601 date and time")
    return parsed


def import_run(project: Project, document: dict, user=None) -> Run:
    """Create the exported run in ``project`` through the write side (its key gets a suffix if taken), with
    its notes, labels and bookmarks, in one transaction; its analysis is enqueued when that commits."""
    try:
        with transaction.atomic():
            run, calls = imports.store_run(project, document)
            _import_review(project, run, calls, document, user)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ImportError_):
            raise
        raise ImportError_(f"the document is malformed: {exc!r}") from None
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
            created_at=_time(entry["created_at"], "notes[].created_at"),
            updated_at=_time(entry.get("updated_at") or entry["created_at"], "notes[].updated_at"),
        )
        NoteRevision.objects.bulk_create(
            [
                NoteRevision(
                    note=note, body=revision["body"], edited_at=_time(revision["edited_at"], "edited_at")
                )
                for revision in entry.get("revisions", [])
            ]
        )
    labels = document.get("labels", [])
    for label in labels:
        link = label.get("link") or ""
        # As the label API: an export from elsewhere must not bring a javascript: link.
        require(
            isinstance(link, str) and (not link or link.startswith(("http://", "https://"))),
            "labels[].link must be an http(s) URL",
        )
    Label.objects.bulk_create(
        [
            Label(
                project=project,
                run=run,
                name=str(label["name"])[:64],
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
    """The run's calls with usage, one row per call, for spreadsheets."""
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
            len(call.items),
            call.content_captured,
            cache.get("cause") or "",
            cache.get("invalidator_item_id") or "",
            call.trace_id,
            call.span_id,
        ]
        writer.writerow([csv_cell(cell) for cell in row])
    return out.getvalue()
