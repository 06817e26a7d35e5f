"""Writing through the API: notes, labels, bookmarks (editors), run deletion, import and project data
policy (admins); and run export and CSV (anyone who may read the run).

Writes need the role, as a logged-in session (with Django's CSRF token) or a user's personal API token
(``ctxview.tokens``); an ingest key reads, and writes only what ingest writes (an import). A stranger's
request is a 404, a member without the role a 403, each with a one-line JSON message.
"""

from django.http import HttpRequest, HttpResponse, JsonResponse

from ctxview import exchange, writes
from ctxview.access import api_projects, ingest_key
from ctxview.api_common import error, json_body, readable_run, require_role, review_view
from ctxview.models import Note
from ctxview.writes import Refused
from ingest import export_format
from ingest.analyse import config_for
from ingest.models import Call, Membership, Project

MAX_IMPORT_BYTES = 64 * 1024 * 1024


# --- Notes ---------------------------------------------------------------------------------------


@review_view(["GET", "POST"])
def run_notes(request: HttpRequest, run_id: int) -> JsonResponse:
    """The run's notes (GET), or a new note on the run, one of its calls (call_seq) or items (item_id)."""
    run = readable_run(request, run_id)
    if request.method == "GET":
        notes = run.review_notes.select_related("author", "call").prefetch_related("revisions__editor")
        return JsonResponse({"notes": [note.to_dict() for note in notes.order_by("created_at")]})
    require_role(request, run.project, Membership.Role.EDITOR)
    data = json_body(request)
    note = writes.add_note(
        run,
        request.user,
        body=data.get("body"),
        call_seq=data.get("call_seq"),
        item_id=data.get("item_id", ""),
    )
    return JsonResponse(note.to_dict(), status=201)


@review_view(["PATCH", "DELETE"])
def note_detail(request: HttpRequest, note_id: int) -> HttpResponse:
    """Edit a note (the earlier text is kept as a revision) or delete it (its author or an admin)."""
    note = (
        Note.objects.filter(id=note_id, project__in=api_projects(request)).select_related("project").first()
    )
    if note is None:
        raise Refused("no such note", 404)
    require_role(request, note.project, Membership.Role.EDITOR)
    if request.method == "DELETE":
        writes.delete_note(note, request.user)
        return HttpResponse(status=204)
    writes.check_may_change_note(note, request.user)  # before the body: a stranger's edit is a 403
    return JsonResponse(writes.edit_note(note, request.user, json_body(request).get("body")).to_dict())


# --- Labels and bookmarks ------------------------------------------------------------------------


@review_view(["GET", "POST"])
def run_labels(request: HttpRequest, run_id: int) -> JsonResponse:
    run = readable_run(request, run_id)
    if request.method == "POST":
        require_role(request, run.project, Membership.Role.EDITOR)
        data = json_body(request)
        writes.add_label(run, request.user, name=data.get("name"), link=data.get("link", ""))
    return JsonResponse({"labels": [label.to_dict() for label in run.labels.order_by("name")]})


@review_view(["DELETE"])
def run_label(request: HttpRequest, run_id: int, name: str) -> HttpResponse:
    run = readable_run(request, run_id)
    require_role(request, run.project, Membership.Role.EDITOR)
    return (
        HttpResponse(status=204)
        if writes.remove_label(run, name)
        else error("no such label on this run", 404)
    )


@review_view(["PUT", "DELETE"])
def call_bookmark(request: HttpRequest, call_id: int) -> HttpResponse:
    call = (
        Call.objects.filter(id=call_id, project__in=api_projects(request)).select_related("project").first()
    )
    if call is None:
        raise Refused("no such call", 404)
    require_role(request, call.project, Membership.Role.EDITOR)
    writes.set_bookmark(call, request.user, on=request.method == "PUT")
    return HttpResponse(status=204)


# --- Runs: export, CSV, delete, import -----------------------------------------------------------


@review_view(["GET"])
def run_export(request: HttpRequest, run_id: int) -> HttpResponse:
    run = readable_run(request, run_id)
    response = JsonResponse(exchange.export_run(run))
    response["Content-Disposition"] = f'attachment; filename="ctxview-run-{run.id}.json"'
    return response


@review_view(["GET"])
def run_calls_csv(request: HttpRequest, run_id: int) -> HttpResponse:
    run = readable_run(request, run_id)
    response = HttpResponse(exchange.calls_csv(run), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="ctxview-run-{run.id}-calls.csv"'
    return response


@review_view(["DELETE"])
def run_delete(request: HttpRequest, run_id: int) -> HttpResponse:
    run = readable_run(request, run_id)
    require_role(request, run.project, Membership.Role.ADMIN)
    return JsonResponse({"deleted": writes.delete_run(run)})


def _project(request: HttpRequest, slug: str) -> Project:
    project = api_projects(request).filter(slug=slug).first()
    if project is None:
        raise Refused("no such project", 404)
    return project


@review_view(["POST"])
def project_import(request: HttpRequest, slug: str) -> JsonResponse:
    """Import a run export into the project: an admin's session, or the project's ingest key."""
    project = _project(request, slug)
    if ingest_key(request) is None:
        require_role(request, project, Membership.Role.ADMIN)
    try:
        run = exchange.import_run(
            project,
            json_body(request, limit=MAX_IMPORT_BYTES, parse_float=export_format.number),
            user=request.user if request.user.is_authenticated else None,
        )
    except exchange.AlreadyImported as exc:
        raise Refused(f"cannot import: {exc}", 409) from None
    except exchange.ImportError_ as exc:
        raise Refused(f"cannot import: {exc}", 400) from None
    return JsonResponse({"run": run.id, "key": run.key, "calls": run.call_count}, status=201)


@review_view(["GET", "PATCH"])
def project_policy(request: HttpRequest, slug: str) -> JsonResponse:
    """The project's data policy: retention, raw-batch retention, hash-only mode, redaction patterns."""
    project = _project(request, slug)
    if request.method == "PATCH":
        require_role(request, project, Membership.Role.ADMIN)
        data = json_body(request)
        writes.update_policy(project, {name: data[name] for name in writes.POLICY_FIELDS if name in data})
    return JsonResponse(
        {
            "project": project.slug,
            "retention_days": project.retention_days,
            "raw_retention_days": project.raw_retention_days,
            "hash_only": project.hash_only,
            "redaction_patterns": project.redaction_patterns,
            # Stored patterns that cannot run; while there is one, every string is masked whole.
            "redaction_problems": [
                {"pattern": name, "problem": problem} for name, problem in project.redactor().unusable
            ],
        }
    )


@review_view(["GET", "PUT"])
def project_prices(request: HttpRequest, slug: str) -> JsonResponse:
    """Prices per model (USD per million tokens): the built-in table with the project's own on top.

    PUT replaces the project's own prices (an admin) and analyses every run of the project again."""
    project = _project(request, slug)
    if request.method == "PUT":
        require_role(request, project, Membership.Role.ADMIN)
        writes.set_prices(project, json_body(request).get("prices"))
    table = config_for(project).prices
    return JsonResponse(
        {"prices": [{"model": model, **price.to_dict()} for model, price in sorted(table.items())]}
    )
