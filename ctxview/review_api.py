"""Writing through the API: notes, labels, bookmarks (editors), run deletion, import and project data
policy (admins); and run export and CSV (anyone who may read the run).

Writes need a logged-in session with the role (and Django's CSRF token); an ingest key reads, and
writes only what ingest writes (an import). A stranger's request is a 404, a member without the role a
403, each with a one-line JSON message.
"""

import json
import math
from functools import wraps

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from ctxview import exchange, writes
from ctxview.access import NotAuthenticated, api_projects, has_role
from ctxview.api import error, run_detail
from ctxview.models import Note
from ctxview.untrusted import MAX_JSON_DEPTH, json_problem
from ctxview.writes import Refused
from ingest.analyse import config_for
from ingest.keys import key_from_request
from ingest.models import Call, Membership, Project, Run

MAX_IMPORT_BYTES = 64 * 1024 * 1024


_csrf = CsrfViewMiddleware(lambda request: None)


def review_view(methods: list[str]):
    """Allowed methods; CSRF for sessions (a key is no cookie); Refused becomes a JSON error."""

    def decorate(view):
        @csrf_exempt
        @require_http_methods(methods)
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if key_from_request(request) is None and _csrf.process_view(request, None, (), {}) is not None:
                return error("CSRF token missing or incorrect: send the X-CSRFToken header", 403)
            try:
                return view(request, *args, **kwargs)
            except NotAuthenticated as exc:
                return error(str(exc), 401)
            except Refused as exc:
                return error(str(exc), exc.status)

        return wrapper

    return decorate


def json_body(request: HttpRequest, limit: int = 1_000_000) -> dict:
    try:
        declared = int(request.headers.get("Content-Length") or 0)
    except ValueError:
        raise Refused("Content-Length is not a number", 400) from None
    if declared > limit:
        raise Refused(f"the body is larger than {limit} bytes", 413)
    # Not request.body: it refuses anything over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB) with an HTML 400,
    # and imports may be up to MAX_IMPORT_BYTES.
    raw = request.read(limit + 1)
    if len(raw) > limit:
        raise Refused(f"the body is larger than {limit} bytes", 413)
    try:
        value = json.loads(raw or b"{}", parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise Refused(f"the body is nested deeper than {MAX_JSON_DEPTH} levels", 400) from None
    except ValueError as exc:
        raise Refused(f"the body is not valid JSON: {exc}", 400) from None
    if not isinstance(value, dict):
        raise Refused("the body must be a JSON object", 400)
    if problem := json_problem(value):
        raise Refused(problem, 400)
    return value


def _no_constant(name: str):
    # Python's json reads NaN and Infinity, which are not JSON and which PostgreSQL's jsonb refuses.
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400
        raise ValueError(f"{text[:40]} is too large a number")
    return number


def readable_run(request: HttpRequest, run_id: int) -> Run:
    run = Run.objects.filter(id=run_id, project__in=api_projects(request)).select_related("project").first()
    if run is None:
        raise Refused("no such run", 404)
    return run


def require_role(request: HttpRequest, project: Project, role: str) -> None:
    if key_from_request(request) is not None or not request.user.is_authenticated:
        raise Refused(f"this needs a logged-in {role}; an ingest key can only read", 403)
    if not has_role(request.user, project, role):
        raise Refused(f"this needs the {role} role in project {project.slug}", 403)


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


@csrf_exempt
def run_resource(request: HttpRequest, run_id: int) -> HttpResponse:
    """GET /api/v1/runs/{id} reads the run; DELETE deletes it (an admin)."""
    if request.method == "DELETE":
        return run_delete(request, run_id)
    return run_detail(request, run_id)


def _project(request: HttpRequest, slug: str) -> Project:
    project = api_projects(request).filter(slug=slug).first()
    if project is None:
        raise Refused("no such project", 404)
    return project


@review_view(["POST"])
def project_import(request: HttpRequest, slug: str) -> JsonResponse:
    """Import a run export into the project: an admin's session, or the project's ingest key."""
    project = _project(request, slug)
    if key_from_request(request) is None:
        require_role(request, project, Membership.Role.ADMIN)
    try:
        run = exchange.import_run(
            project,
            json_body(request, limit=MAX_IMPORT_BYTES),
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
