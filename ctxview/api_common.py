"""What the JSON API views share (ctxview.api reads, review_api and replay_api write): the JSON error,
the decorators that resolve the caller and turn refusals into errors, the bounded JSON body, and the
run and role checks. The API views import this module, never one another."""

import json
import math
from functools import wraps

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from ctxview.access import NotAuthenticated, api_projects, has_role, ingest_key
from ctxview.params import BadParameter, int_param
from ctxview.untrusted import MAX_JSON_DEPTH, json_problem
from ctxview.writes import Refused
from ingest.models import Project, Run


def error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def api_view(view):
    """GET only; resolve the caller's projects (401 without credentials); bad parameters are a 400."""

    @require_GET
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> JsonResponse:
        try:
            projects = api_projects(request)
        except NotAuthenticated as exc:
            return error(str(exc), 401)
        try:
            return view(request, projects, *args, **kwargs)
        except BadParameter as exc:
            return error(str(exc), 400)

    return wrapper


def int_query(request: HttpRequest, name: str, default: int, minimum: int, maximum: int) -> int:
    """A whole number of the query string (present but empty is no number: a 400)."""
    return int_param(request.GET, name, default, minimum, maximum, blank_is_default=False)


def get_run(projects: QuerySet[Project], run_id: int) -> Run | None:
    return Run.objects.filter(project__in=projects, id=run_id).select_related("project").first()


_csrf = CsrfViewMiddleware(lambda request: None)


def review_view(methods: list[str]):
    """Allowed methods; CSRF for sessions (a key is no cookie, and ``ctxview.tokens`` marks a token's
    request exempt); Refused becomes a JSON error."""

    def decorate(view):
        @csrf_exempt
        @require_http_methods(methods)
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if ingest_key(request) is None and _csrf.process_view(request, None, (), {}) is not None:
                return error("CSRF token missing or incorrect: send the X-CSRFToken header", 403)
            try:
                return view(request, *args, **kwargs)
            except NotAuthenticated as exc:
                return error(str(exc), 401)
            except Refused as exc:
                return error(str(exc), exc.status)
            except BadParameter as exc:  # a query parameter out of its bounds (the monitors' alerts)
                return error(str(exc), 400)

        return wrapper

    return decorate


def json_body(request: HttpRequest, limit: int = 1_000_000, parse_float=None) -> dict:
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
        value = json.loads(raw or b"{}", parse_constant=_no_constant, parse_float=parse_float or _finite)
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
    if ingest_key(request) is not None or not request.user.is_authenticated:
        raise Refused(f"this needs a logged-in {role}; an ingest key can only read", 403)
    if not has_role(request.user, project, role):
        raise Refused(f"this needs the {role} role in project {project.slug}", 403)


def by_method(**views):
    """One URL, a view per method (``GET=…, DELETE=…``); any other method is a 405."""

    @csrf_exempt  # each view checks CSRF itself (review_view), or only reads
    def dispatch(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        view = views.get(request.method)
        if view is None:
            return error(f"{request.method} is not allowed here (only {', '.join(views)})", 405)
        return view(request, *args, **kwargs)

    return dispatch
