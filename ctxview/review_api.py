"""Writing through the API: notes, labels, bookmarks (editors), run deletion, import and project data
policy (admins); and run export and CSV (anyone who may read the run).

Writes need a logged-in session with the role (and Django's CSRF token); an ingest key reads, and
writes only what ingest writes (an import). A stranger's request is a 404, a member without the role a
403, each with a one-line JSON message.
"""

import json
import math
from functools import partial, wraps

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from ctxcore.analysis import prices
from ctxview import exchange
from ctxview.access import NotAuthenticated, api_projects, has_role
from ctxview.api import error, run_detail
from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.untrusted import MAX_JSON_DEPTH, json_problem
from ingest.analyse import config_for, invalidate
from ingest.keys import key_from_request
from ingest.models import Call, Membership, Project, Run
from ingest.redact import PatternError, Redactor
from ingest.retention import delete_runs
from ingest.tasks import enqueue_analysis

MAX_IMPORT_BYTES = 64 * 1024 * 1024


class Refused(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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


def _body(request: HttpRequest, limit: int = 1_000_000) -> dict:
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


def _readable_run(request: HttpRequest, run_id: int) -> Run:
    run = Run.objects.filter(id=run_id, project__in=api_projects(request)).select_related("project").first()
    if run is None:
        raise Refused("no such run", 404)
    return run


def _require_role(request: HttpRequest, project: Project, role: str) -> None:
    if key_from_request(request) is not None or not request.user.is_authenticated:
        raise Refused(f"this needs a logged-in {role}; an ingest key can only read", 403)
    if not has_role(request.user, project, role):
        raise Refused(f"this needs the {role} role in project {project.slug}", 403)


def _text(data: dict, name: str, limit: int, required: bool = True) -> str:
    value = data.get(name, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise Refused(f"{name} must be a non-empty string" if required else f"{name} must be a string", 400)
    if len(value) > limit:
        raise Refused(f"{name} is longer than {limit} characters", 400)
    return value.strip()


# --- Notes ---------------------------------------------------------------------------------------


@review_view(["GET", "POST"])
def run_notes(request: HttpRequest, run_id: int) -> JsonResponse:
    """The run's notes (GET), or a new note on the run, one of its calls (call_seq) or items (item_id)."""
    run = _readable_run(request, run_id)
    if request.method == "GET":
        notes = run.review_notes.select_related("author", "call").prefetch_related("revisions__editor")
        return JsonResponse({"notes": [note.to_dict() for note in notes.order_by("created_at")]})
    _require_role(request, run.project, Membership.Role.EDITOR)
    data = _body(request)
    call = None
    if data.get("call_seq") is not None:
        call = run.calls.filter(seq=data["call_seq"]).first() if isinstance(data["call_seq"], int) else None
        if call is None:
            raise Refused("call_seq names no call of this run", 400)
    note = Note.objects.create(
        project=run.project,
        run=run,
        call=call,
        item_id=_text(data, "item_id", 500, required=False),
        author=request.user,
        body=_text(data, "body", 20_000),
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
    _require_role(request, note.project, Membership.Role.EDITOR)
    if note.author_id != request.user.id and not has_role(request.user, note.project, Membership.Role.ADMIN):
        raise Refused("only the note's author or an admin may change it", 403)
    if request.method == "DELETE":
        note.delete()
        return HttpResponse(status=204)
    body = _text(_body(request), "body", 20_000)
    NoteRevision.objects.create(note=note, body=note.body, editor=request.user)
    note.body, note.updated_at = body, timezone.now()
    note.save(update_fields=["body", "updated_at"])
    return JsonResponse(note.to_dict())


# --- Labels and bookmarks ------------------------------------------------------------------------


@review_view(["GET", "POST"])
def run_labels(request: HttpRequest, run_id: int) -> JsonResponse:
    run = _readable_run(request, run_id)
    if request.method == "POST":
        _require_role(request, run.project, Membership.Role.EDITOR)
        data = _body(request)
        name = _text(data, "name", 64).lower()
        link = _text(data, "link", 500, required=False)
        if link and not link.startswith(("http://", "https://")):
            raise Refused("link must be an http(s) URL", 400)
        Label.objects.update_or_create(
            run=run, name=name, defaults={"project": run.project, "link": link, "created_by": request.user}
        )
    return JsonResponse({"labels": [label.to_dict() for label in run.labels.order_by("name")]})


@review_view(["DELETE"])
def run_label(request: HttpRequest, run_id: int, name: str) -> HttpResponse:
    run = _readable_run(request, run_id)
    _require_role(request, run.project, Membership.Role.EDITOR)
    deleted, _ = run.labels.filter(name=name).delete()
    return HttpResponse(status=204) if deleted else error("no such label on this run", 404)


@review_view(["PUT", "DELETE"])
def call_bookmark(request: HttpRequest, call_id: int) -> HttpResponse:
    call = (
        Call.objects.filter(id=call_id, project__in=api_projects(request)).select_related("project").first()
    )
    if call is None:
        raise Refused("no such call", 404)
    _require_role(request, call.project, Membership.Role.EDITOR)
    if request.method == "PUT":
        Bookmark.objects.get_or_create(
            call=call, defaults={"project": call.project, "created_by": request.user}
        )
    else:
        Bookmark.objects.filter(call=call).delete()
    return HttpResponse(status=204)


# --- Runs: export, CSV, delete, import -----------------------------------------------------------


@review_view(["GET"])
def run_export(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _readable_run(request, run_id)
    response = JsonResponse(exchange.export_run(run))
    response["Content-Disposition"] = f'attachment; filename="ctxview-run-{run.id}.json"'
    return response


@review_view(["GET"])
def run_calls_csv(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _readable_run(request, run_id)
    response = HttpResponse(exchange.calls_csv(run), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="ctxview-run-{run.id}-calls.csv"'
    return response


@review_view(["DELETE"])
def run_delete(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _readable_run(request, run_id)
    _require_role(request, run.project, Membership.Role.ADMIN)
    return JsonResponse({"deleted": delete_runs(run.project_id, [run.id])})


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
        _require_role(request, project, Membership.Role.ADMIN)
    try:
        run = exchange.import_run(
            project,
            _body(request, limit=MAX_IMPORT_BYTES),
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
        _require_role(request, project, Membership.Role.ADMIN)
        data = _body(request)
        for name in ("retention_days", "raw_retention_days"):
            if name in data:
                if (
                    isinstance(data[name], bool)
                    or not isinstance(data[name], int)
                    or not 1 <= data[name] <= 3650
                ):
                    raise Refused(f"{name} must be a whole number of days from 1 to 3650", 400)
                setattr(project, name, data[name])
        if "hash_only" in data:
            if not isinstance(data["hash_only"], bool):
                raise Refused("hash_only must be true or false", 400)
            project.hash_only = data["hash_only"]
        if "redaction_patterns" in data:
            patterns = data["redaction_patterns"]
            if not isinstance(patterns, list) or not all(
                isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)
                for entry in patterns
            ):
                raise Refused("redaction_patterns must be a list of [name, regular expression] pairs", 400)
            try:
                Redactor.from_patterns(tuple(entry) for entry in patterns)
            except PatternError as exc:
                raise Refused(str(exc), 400) from None
            project.redaction_patterns = patterns
        project.save()
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


# Dollars per million tokens; far above any real price, and keeps every figure finite (1e400 is inf).
MAX_PRICE = 1_000_000
PRICE_FIELDS = prices.FIELDS  # what a stored price row may set (analysis.prices.table_from_rows reads it)


@review_view(["GET", "PUT"])
def project_prices(request: HttpRequest, slug: str) -> JsonResponse:
    """Prices per model (USD per million tokens): the built-in table with the project's own on top.

    PUT replaces the project's own prices (an admin) and analyses every run of the project again."""
    project = _project(request, slug)
    if request.method == "PUT":
        _require_role(request, project, Membership.Role.ADMIN)
        try:
            project.prices = clean_prices(_body(request).get("prices"))
        except ValueError as exc:
            raise Refused(str(exc), 400) from None
        project.save(update_fields=["prices"])
        reanalyse(project)
    table = config_for(project).prices
    return JsonResponse(
        {"prices": [{"model": model, **price.to_dict()} for model, price in sorted(table.items())]}
    )


def clean_prices(rows) -> list[dict]:
    """A project's own prices as given (API or settings page), checked; ValueError says what is wrong."""
    if not isinstance(rows, list):
        raise ValueError('the body must be {"prices": [{"model": ..., "input": ..., "output": ...}, ...]}')
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("model"), str) or not row["model"].strip():
            raise ValueError(f"prices[{index}] needs a model name")
        for name in PRICE_FIELDS:
            value = row.get(name)
            required = name in ("input", "output")
            if (value is None and required) or (
                value is not None
                and (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not 0 <= value <= MAX_PRICE
                )
            ):
                raise ValueError(
                    f"prices[{index}].{name} must be a number of dollars per million tokens"
                    f" from 0 to {MAX_PRICE:,}"
                )
    return [{"model": row["model"].strip(), **{n: row[n] for n in PRICE_FIELDS if n in row}} for row in rows]


def reanalyse(project: Project) -> None:
    """Costs are summed along the analysis: new prices mean analysing every run from its first call."""
    for run in Run.objects.filter(project=project).only("id", "analysed_seq"):
        invalidate(run, 1)
        transaction.on_commit(partial(enqueue_analysis, run.id), robust=True)
