"""HTML views. Thin: check access, fetch, render."""

import math

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.text import slugify
from django.views.decorators.http import require_POST

from ctxcore import catalogue
from ctxview import queries, throttle
from ctxview.access import get_project_for_user, has_role, projects_for_user
from ctxview.params import BadParameter
from ctxview.shapes import runs as runs_query
from ctxview.views_common import bad_request, render_page, ui_view
from ingest.keys import create_key
from ingest.models import IngestKey, Membership, Project, RawBatch


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
    name = request.POST.get("name", "").strip()[:200]
    slug = slugify(name)[:64]
    if not slug:
        return bad_request(request, "a project needs a name with at least one letter or digit")
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name)
            Membership.objects.create(project=project, user=request.user, role=Membership.Role.ADMIN)
    except IntegrityError:
        messages.error(request, f"a project called {slug!r} already exists")
        return redirect("cv-projects")
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
def runs(request: HttpRequest, slug: str) -> HttpResponse:
    """The project's runs: filter by service, model, time, finding type, label and what their windows held;
    sort; a page at a time."""
    project = get_project_for_user(request.user, slug)
    choices = queries.run_choices(project)
    filters = runs_query.parse(
        request.GET, choices["services"], choices["models"], choices["finding_types"], choices["labels"]
    )
    paginator = Paginator(queries.runs(project, filters), runs_query.PAGE_SIZE)
    if filters["page"] > paginator.num_pages:
        raise BadParameter(f"page {filters['page']} does not exist: there are {paginator.num_pages} page(s)")
    page = paginator.page(filters["page"])
    rows = list(page.object_list)
    counts = queries.finding_counts([run.id for run in rows])
    for run in rows:
        run.badges = [
            {"type": name, "count": count, "help": catalogue.finding_help(name)}
            for name, count in sorted(counts[run.id].items())
        ]
        run.figures = runs_query.figures(run.accounting)
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
        "filtered": any(
            filters[name] for name in ("service", "model", "finding", "label", "held", "since", "until")
        ),
        "any_runs": project.runs.exists(),
        "endpoint": request.build_absolute_uri("/"),
    }
    return render_page(request, "ctxview/runs.html", context, regions=("page", "runs-table"))
