"""Export a run as one JSON document, and import such a document into a project.

The document (format "ctxview.run-export", version 1; schema: schemas/run-export-v1.schema.json) holds the
run, its calls with usage and manifests, the content of their items (unless the project is hash-only),
the findings and accounting as they were, and the notes, labels and bookmarks. An import recreates the
run and its calls as exported and analyses them again, so the target shows the same screens and findings.
"""

import csv
import io
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.untrusted import csv_cell
from ingest.analyse import analyse_run
from ingest.models import Call, Content, Project, Run

FORMAT = "ctxview.run-export"
VERSION = 1

CALL_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "seq",
    "turn",
    "turn_hint",
    "user_fingerprint",
    "carried_fingerprint",
    "carried_invocation",
    "name",
    "start_ns",
    "end_ns",
    "provider",
    "operation",
    "request_model",
    "response_model",
    "response_id",
    "agent_name",
    "usage_raw",
    "notes",
    "content_captured",
    "manifest_source",
    "manifest_error",
    "items",
    "excluded",
    "budget",
    "prompt_version",
    "tool_calls",
    "tool_definitions",
    "finish_reasons",
)
RUN_FIELDS = ("key", "key_source", "service_name", "agent_name")
NOTE_FIELDS = ("call_seq", "item_id", "author", "body", "created_at", "updated_at", "revisions")
USAGE_FIELDS = Run.USAGE_FIELDS


class ImportError_(ValueError):
    """The document cannot be imported; the message says why."""


class AlreadyImported(ImportError_):
    """The run's calls are already in the project: importing them again would duplicate them."""


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
        "run": {name: getattr(run, name) for name in RUN_FIELDS},
        "calls": [
            {**{name: getattr(call, name) for name in CALL_FIELDS}, "usage": call.usage_dict()}
            for call in calls
        ],
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


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ImportError_(message)


def _time(value, where: str) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    _require(parsed is not None, f"{where} must be an ISO 8601 date and time")
    return parsed


def _free_key(project: Project, key: str) -> str:
    if not Run.objects.filter(project=project, key=key).exists():
        return key
    number = 2
    while Run.objects.filter(project=project, key=f"{key} (import {number})").exists():
        number += 1
    return f"{key} (import {number})"


def import_run(project: Project, document: dict, user=None) -> Run:
    """Create the exported run in ``project`` (its key gets a suffix if taken) and analyse it."""
    _require(isinstance(document, dict), "the document must be a JSON object")
    _require(document.get("format") == FORMAT, f"format must be {FORMAT!r}")
    _require(
        # type(): true == 1 in Python, but a boolean is no version number.
        type(document.get("version")) is int and document["version"] == VERSION,
        f"version {document.get('version')!r} is not supported (1 is)",
    )
    for key, kind in (
        ("run", dict),
        ("calls", list),
        ("contents", dict),
        ("notes", list),
        ("labels", list),
        ("bookmarks", list),
    ):
        _require(isinstance(document.get(key, kind()), kind), f"{key} must be a {kind.__name__}")
    run_data, calls_data = document["run"], document.get("calls", [])
    _require(isinstance(run_data.get("key"), str) and run_data["key"], "run.key is required")
    spans = {
        (str(call.get("trace_id")), str(call.get("span_id"))) for call in calls_data if isinstance(call, dict)
    }
    existing = Call.objects.filter(
        project=project, trace_id__in={trace for trace, _ in spans}, span_id__in={span for _, span in spans}
    ).values_list("trace_id", "span_id", "run__key")
    for trace_id, span_id, run_key in existing:
        if (trace_id, span_id) in spans:
            raise AlreadyImported(f"its calls are already in project {project.slug} (run {run_key!r})")
    try:
        with transaction.atomic():
            run = Run.objects.create(
                project=project,
                **{name: run_data.get(name) or "" for name in RUN_FIELDS if name != "key"},
                key=_free_key(project, run_data["key"][:180]),
            )
            calls = []
            for index, data in enumerate(calls_data):
                _require(isinstance(data, dict), f"calls[{index}] must be an object")
                usage = data.get("usage") or {}
                calls.append(
                    Call(
                        project=project,
                        run=run,
                        started_at=datetime.fromtimestamp(int(data["start_ns"]) / 1e9, tz=UTC),
                        **{name: data[name] for name in CALL_FIELDS if name in data},
                        **{name: usage.get(name) for name in USAGE_FIELDS},
                    )
                )
            calls.sort(key=lambda call: call.seq)
            _require(
                [call.seq for call in calls] == list(range(1, len(calls) + 1)),
                "calls must be numbered 1..n without gaps",
            )
            Call.objects.bulk_create(calls, batch_size=500)
            _import_contents(project, document.get("contents", {}))
            _restore_run_state(run, calls)
            _import_review(project, run, calls, document, user)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ImportError_):
            raise
        raise ImportError_(f"the document is malformed: {exc!r}") from None
    analyse_run(run.id)
    run.refresh_from_db()
    return run


def _import_contents(project: Project, contents: dict) -> None:
    if project.hash_only:
        return
    redactor = project.redactor()
    Content.objects.bulk_create(
        [
            # The target's redaction applies; the hash stays that of the content the agent sent.
            Content(
                project=project,
                hash=str(content_hash)[:32],
                text=redactor.mask(str(value["text"])),
                truncated=bool(value.get("truncated")),
            )
            for content_hash, value in contents.items()
        ],
        ignore_conflicts=True,
        batch_size=500,
    )


def _restore_run_state(run: Run, calls: list[Call]) -> None:
    """Totals and the carried state, as ingest would have left them after these calls."""
    for call in calls:
        run.count_call(call.usage_dict(), call.model, call.agent_name)
    if calls:
        first, last = calls[0], calls[-1]
        run.call_count, run.turn_count = last.seq, max(call.turn or 0 for call in calls)
        run.started_at, run.last_call_at = first.started_at, last.started_at
        run.last_start_ns, run.last_span_id = last.start_ns, last.span_id
        run.last_fingerprint, run.last_invocation = last.carried_fingerprint, last.carried_invocation
        run.last_trace_id = last.trace_id
    run.save()


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
        _require(
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
