"""HTML views. Thin: check access, fetch, render."""

import math

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseLocation

from ctxcore import catalogue
from ctxview import queries, search, throttle, writes
from ctxview.access import get_project_for_user, get_run_for_user, has_role, projects_for_user
from ctxview.params import BadParameter, check_page, int_param, jump_target
from ctxview.shapes import runs as runs_query
from ctxview.views_common import bad_request, render_page, ui_view
from ingest.keys import create_key
from ingest.models import IngestKey, Membership, Project, RawBatch, Run


class LoginView(auth_views.LoginView):
    """Django's login page, throttled per user and per address (ctxview.throttle): past the limit a 429
    with the wait, before any password is checked."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        username = request.POST.get("username", "")[:150]
        wait = throttle.wait_seconds(username, throttle.client_address(request))
        if wait:
            minutes = math.ceil(wait / 60)
            message = (
                "Too many failed logins for this user or from this address: "
                f"try again in {minutes} minute{'s' if minutes != 1 else ''}."
            )
            response = self.render_to_response(
                self.get_context_data(form=self.get_form_class()(request), throttled=message), status=429
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form) -> HttpResponse:
        throttle.failed(self.request.POST.get("username", "")[:150], throttle.client_address(self.request))
        return super().form_invalid(form)

    def form_valid(self, form) -> HttpResponse:
        throttle.succeeded(form.get_user().get_username())
        return super().form_valid(form)

    def get_default_redirect_url(self) -> str:
        """Without a ``next``: the runs of the user's most recently active project (the projects page for
        a user of none)."""
        project = queries.most_recently_active(projects_for_user(self.request.user))
        return reverse("cv-runs", args=[project.slug]) if project else super().get_default_redirect_url()


@ui_view
def projects(request: HttpRequest) -> HttpResponse:
    rows = (
        projects_for_user(request.user)
        .annotate(
            batch_count=Count("batches", distinct=True),
            failed_count=Count("batches", filter=Q(batches__status=RawBatch.Status.FAILED), distinct=True),
        )
        .order_by("slug")
    )
    return render_page(request, "ctxview/projects.html", {"projects": rows, "title": "Projects"})


@require_POST
@login_required
def create_project(request: HttpRequest) -> HttpResponse:
    try:
        project = writes.create_project(request.POST.get("name", ""), owner=request.user)
    except writes.Refused as exc:
        if exc.status == 409:
            messages.error(request, str(exc))
            return redirect("cv-projects")
        return bad_request(request, str(exc))
    return redirect("cv-project", slug=project.slug)


@ui_view
def project(request: HttpRequest, slug: str) -> HttpResponse:
    return _render_project(request, get_project_for_user(request.user, slug))


def _render_project(request: HttpRequest, project: Project, new_key: str | None = None) -> HttpResponse:
    context = {
        "project": project,
        "is_admin": has_role(request.user, project, Membership.Role.ADMIN),
        "keys": project.keys.order_by("-created_at"),
        "members": Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("user__username"),
        "batches": project.batches.order_by("-received_at").defer("body")[:20],
        "new_key": new_key,
        "endpoint": request.build_absolute_uri("/"),
        "title": project.name,
    }
    return render_page(request, "ctxview/project.html", context)


@require_POST
@login_required
def create_ingest_key(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug, role=Membership.Role.ADMIN)
    name = request.POST.get("name", "").strip()[:100]
    key = create_key(project, name=name, user=request.user)
    # Shown in this response only: the key is not stored, just its hash.
    return _render_project(request, project, new_key=key)


@require_POST
@login_required
def revoke_ingest_key(request: HttpRequest, slug: str, key_id: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug, role=Membership.Role.ADMIN)
    key = IngestKey.objects.filter(project=project, key_id=key_id).first()
    if key is None:
        return bad_request(request, "no such key in this project")
    key.revoke()
    messages.success(request, f"key {key.key_id} revoked")
    return redirect("cv-project", slug=project.slug)


@ui_view
def api_tokens(request: HttpRequest) -> HttpResponse:
    """The user's personal API tokens: create, list, revoke."""
    return _render_tokens(request)


def _render_tokens(request: HttpRequest, new_token: str | None = None) -> HttpResponse:
    context = {
        "tokens": request.user.api_tokens.order_by("-created_at"),
        "new_token": new_token,
        "api_url": request.build_absolute_uri(reverse("cv-api-runs")),
        "title": "API tokens",
    }
    return render_page(request, "ctxview/tokens.html", context)


@require_POST
@login_required
@never_cache  # the answer holds the token
def create_api_token(request: HttpRequest) -> HttpResponse:
    try:
        _row, token = writes.create_token(
            request.user, name=request.POST.get("name", ""), read_only=request.POST.get("read_only") == "on"
        )
    except writes.Refused as exc:
        return bad_request(request, str(exc), exc.status)
    # Shown in this response only: the token is not stored, just its hash.
    return _render_tokens(request, new_token=token)


@require_POST
@login_required
def revoke_api_token(request: HttpRequest, token_id: str) -> HttpResponse:
    try:
        token = writes.revoke_token(request.user, token_id)
    except writes.Refused as exc:
        return bad_request(request, str(exc), exc.status)
    messages.success(request, f"token cvt_{token.token_id}_… revoked")
    return redirect("cv-tokens")


@ui_view
def runs(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's runs: filter by service, model, time, finding type, label and what their windows held;
    sort; a page at a time."""
    project = get_project_for_user(request.user, slug)
    choices = queries.run_choices(project)
    filters = runs_query.parse(
        request.GET, choices["services"], choices["models"], choices["finding_types"], choices["labels"]
    )
    paginator = Paginator(queries.runs(project, filters), runs_query.PAGE_SIZE)
    check_page(filters["page"], paginator.num_pages, "page", "the runs found")
    page = paginator.page(filters["page"])
    rows = list(page.object_list)
    ids = [run.id for run in rows]
    counts = queries.finding_counts(ids)
    costliest = {run.id: runs_query.costliest_breaks(run.accounting) for run in rows}
    firsts = queries.first_breaks({run_id: group["cause"] for run_id, group in costliest.items() if group})
    held = search.first_calls_holding(ids, filters["held"]) if filters["held"] else {}
    for run in rows:
        run.badges = [
            {"type": name, "count": count, "help": catalogue.finding_help(name)}
            for name, count in sorted(counts[run.id].items())
        ]
        run.figures = runs_query.figures(run.accounting)
        # Shortcuts from the row to where a reviewer goes next: the last turn explained, the costliest
        # cause of cache breaks at its first call, and (filtered by what a window held) that window.
        run.explain_url = queries.explain_url(run.id, run.turn_count) if run.turn_count else None
        run.costliest_breaks = {**costliest[run.id], "first": firsts[run.id]} if run.id in firsts else None
        found = held.get(run.id)
        run.held = {**found, "url": queries.call_url(found["call_id"])} if found else None
    query = request.GET.copy()
    query.pop("page", None)
    sort_query = query.copy()
    sort_query.pop("sort", None)
    context = {
        "project": project,
        "title": f"Runs · {project.name}",
        "runs": rows,
        "page": page,
        "filters": filters,
        "choices": choices,
        "query": query.urlencode(),
        "sort_query": sort_query.urlencode(),
        "sorts": runs_query.sort_links(filters["sort"]),
        "filtered": any(filters[name] for name in runs_query.SEARCH_TERMS),
        "any_runs": project.runs.exists(),
        "endpoint": request.build_absolute_uri("/"),
    }
    return render_page(request, "ctxview/runs.html", context, regions=("page", "runs-table"))


JUMP_HELP = "a run key, #57 or turn 40 (from a run's pages), or an item id of the run"
JUMP_MATCHES = 20  # runs listed when the jump box names none exactly


def _go(request: HttpRequest, url: str) -> HttpResponse:
    # htmx: fetch the page into #page and push its address, like a boosted link; otherwise a redirect.
    if getattr(request, "htmx", None):
        return HttpResponseLocation(url, target="#page")
    return redirect(url)


@ui_view
def jump(request: HttpRequest) -> HttpResponse:
    """The jump box (``/`` on any page): to a run by key, to a call or turn of the current run, to an item."""
    text = (request.GET.get("q") or "").strip()
    if not text:
        raise BadParameter(f"type what to jump to: {JUMP_HELP}")
    if len(text) > 500:
        raise BadParameter("q must be at most 500 characters")
    run_id = int_param(request.GET, "run", None, 1, 2**31)
    run = get_run_for_user(request.user, run_id) if run_id is not None else None
    kind, value = jump_target(text)
    if kind != "name" and run is None:
        raise BadParameter(f"“{text}” names a {kind} of a run: jump from one of the run's pages")
    if kind == "call":
        call_id = run.calls.filter(seq=value).values_list("id", flat=True).first()
        if call_id is None:
            raise BadParameter(f"run {run.key} has no call {value}: its calls are 1 to {run.call_count}")
        return _go(request, queries.call_url(call_id))
    if kind == "turn":
        if not 1 <= value <= run.turn_count:
            raise BadParameter(f"run {run.key} has no turn {value}: its turns are 1 to {run.turn_count}")
        return _go(request, queries.explain_url(run.id, value))
    found = (
        Run.objects.filter(project__in=projects_for_user(request.user), key=text)
        .order_by("-updated_at")
        .values_list("id", flat=True)
        .first()
    )
    if found is not None:
        return _go(request, reverse("cv-run", args=[found]))
    held = search.runs_with_item([run.project_id], {"id": text}) if run is not None else ()
    # PostgreSQL answers rows of run ids, the embedded SQLite scan a list of them.
    if run is not None and run.id in {row["run_id"] if isinstance(row, dict) else row for row in held}:
        return _go(request, queries.item_url(run.id, text))
    # No exact match: the runs whose key or title holds the text (a partial key, words of the first
    # message); one goes straight there, several or none are a page of matches in the normal layout.
    matches = list(
        Run.objects.filter(project__in=projects_for_user(request.user))
        .filter(Q(key__icontains=text) | Q(title__icontains=text))
        .select_related("project")
        .order_by("-updated_at")[: JUMP_MATCHES + 1]
    )
    if len(matches) == 1:
        return _go(request, reverse("cv-run", args=[matches[0].id]))
    context = {
        "title": f"Jump: {text}",
        "text": text,
        "runs": matches[:JUMP_MATCHES],
        "more": len(matches) > JUMP_MATCHES,
        "run": run,
        "help": JUMP_HELP,
    }
    return render_page(request, "ctxview/jump.html", context)
