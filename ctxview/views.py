"""HTML views. Thin: check access, fetch, render."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_POST

from ctxview.access import (
    get_call_for_user,
    get_project_for_user,
    get_run_for_user,
    has_role,
    projects_for_user,
)
from ingest.keys import create_key
from ingest.models import Content, IngestKey, Membership, Project, RawBatch


@require_GET
@login_required
def projects(request: HttpRequest) -> HttpResponse:
    rows = (
        projects_for_user(request.user)
        .annotate(
            batch_count=Count("batches", distinct=True),
            failed_count=Count("batches", filter=Q(batches__status=RawBatch.Status.FAILED), distinct=True),
        )
        .order_by("slug")
    )
    return render(request, "ctxview/projects.html", {"projects": rows})


@require_POST
@login_required
def create_project(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "").strip()[:200]
    slug = slugify(name)[:64]
    if not slug:
        return HttpResponseBadRequest("a project needs a name with at least one letter or digit")
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name)
            Membership.objects.create(project=project, user=request.user, role=Membership.Role.ADMIN)
    except IntegrityError:
        messages.error(request, f"a project called {slug!r} already exists")
        return redirect("cv-projects")
    return redirect("cv-project", slug=project.slug)


@require_GET
@login_required
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
    }
    return render(request, "ctxview/project.html", context)


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
        return HttpResponseBadRequest("no such key in this project")
    key.revoke()
    messages.success(request, f"key {key.key_id} revoked")
    return redirect("cv-project", slug=project.slug)


@require_GET
@login_required
def runs(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
    rows = project.runs.filter(started_at__isnull=False).order_by("-started_at", "-id")[:200]
    return render(request, "ctxview/runs.html", {"project": project, "runs": rows})


@require_GET
@login_required
def run(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    calls = run.calls.order_by("seq").defer("items", "excluded", "usage_raw")
    return render(request, "ctxview/run.html", {"run": run, "project": run.project, "calls": calls})


@require_GET
@login_required
def call(request: HttpRequest, call_id: int) -> HttpResponse:
    call = get_call_for_user(request.user, call_id)
    previews = dict(
        Content.objects.filter(
            project_id=call.project_id, hash__in=[item["hash"] for item in call.items]
        ).values_list("hash", "text")
    )
    items = [{**item, "preview": (previews.get(item["hash"]) or "")[:300]} for item in call.full_items()]
    context = {"call": call, "run": call.run, "project": call.run.project, "items": items}
    return render(request, "ctxview/call.html", context)
