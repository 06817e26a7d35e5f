"""The write side of importing a run export: the run, its calls and their contents, stored as exported.

The caller holds the transaction (ctxview.exchange adds the notes, labels and bookmarks in the same one);
the run's analysis is enqueued when it commits (``analyse_run_task``, which takes the run's id and does
nothing more when run twice), so a request never analyses a run itself.
"""

from datetime import UTC, datetime
from functools import partial

from django.db import transaction

from ingest import export_format, itemlists
from ingest.models import Call, Content, Project, Run
from ingest.tasks import enqueue_analysis
from ingest.titles import title_of

FORMAT, VERSION = export_format.FORMAT, export_format.VERSION
CALL_FIELDS = Call.EXPORT_FIELDS
RUN_FIELDS = Run.EXPORT_FIELDS
USAGE_FIELDS = Run.USAGE_FIELDS


class ImportError_(ValueError):
    """The document cannot be imported; the message says why."""


class AlreadyImported(ImportError_):
    """The run's calls are already in the project: importing them again would duplicate them."""


def require(condition: bool, message: str) -> None:
    if not condition:
        raise ImportError_(message)


def refuse_duplicates(project: Project, calls_data: list) -> None:
    spans = {(call["trace_id"], call["span_id"]) for call in calls_data}
    existing = Call.objects.filter(
        project=project, trace_id__in={trace for trace, _ in spans}, span_id__in={span for _, span in spans}
    ).values_list("trace_id", "span_id", "run__key")
    for trace_id, span_id, run_key in existing:
        if (trace_id, span_id) in spans:
            raise AlreadyImported(f"its calls are already in project {project.slug} (run {run_key!r})")


def store_run(project: Project, document: dict) -> tuple[Run, list[Call]]:
    """Create the exported run in ``project`` (its key gets a suffix if taken), its calls and contents, and
    enqueue its analysis on commit. Call inside a transaction. The whole document is checked before
    anything is written (``export_format.problem``): a refusal names the path of what is wrong."""
    if problem := export_format.problem(document):
        raise ImportError_(problem)
    run_data, calls_data = document["run"], document["calls"]
    refuse_duplicates(project, calls_data)
    run = Run.objects.create(
        project=project,
        **{name: run_data.get(name) or "" for name in RUN_FIELDS if name != "key"},
        key=_free_key(project, run_data["key"][:180]),
    )
    calls = []
    for data in calls_data:
        usage = data.get("usage") or {}
        calls.append(
            Call(
                project=project,
                run=run,
                started_at=datetime.fromtimestamp(data["start_ns"] / 1e9, tz=UTC),
                **{name: data[name] for name in CALL_FIELDS if name in data},
                **{name: usage.get(name) for name in USAGE_FIELDS},
            )
        )
    calls.sort(key=lambda call: call.seq)
    itemlists.store(project.id, calls)
    Call.objects.bulk_create(calls, batch_size=500)
    _store_contents(project, document.get("contents", {}))
    _restore_run_state(run, calls)
    transaction.on_commit(partial(enqueue_analysis, run.id), robust=True)
    return run, calls


def _free_key(project: Project, key: str) -> str:
    if not Run.objects.filter(project=project, key=key).exists():
        return key
    number = 2
    while Run.objects.filter(project=project, key=f"{key} (import {number})").exists():
        number += 1
    return f"{key} (import {number})"


def _store_contents(project: Project, contents: dict) -> None:
    if project.hash_only:
        return
    redactor = project.redactor()
    Content.objects.bulk_create(
        [
            # The target's redaction applies; the hash stays that of the content the agent sent.
            Content(
                project=project,
                hash=content_hash,
                text=redactor.mask(value["text"]),
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
        run.title = title_of(run, first)  # (after its contents are stored)
    run.save()
