"""Review pages: a run's notes, labels, bookmarks and exports; a project's data policy, prices and members.

Plain forms (they work without JavaScript), Django's CSRF protection, and the same role rules as the API:
viewers read, editors write notes, labels and bookmarks, admins change the project's settings and members.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from ctxview import writes
from ctxview.access import get_project_for_user, get_run_for_user, has_role, role_at_least, role_of
from ctxview.models import Bookmark
from ctxview.views_common import render_page
from ingest.analyse import config_for
from ingest.models import Membership


def _require(user, project, role: str) -> None:
    if not has_role(user, project, role):
        raise PermissionDenied(f"this needs the {role} role in project {project.slug}")


@require_http_methods(["GET", "POST"])
@login_required
def run_review(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    if request.method == "POST":
        action = request.POST.get("action", "")
        if action == "delete_run":
            _require(request.user, run.project, Membership.Role.ADMIN)
            counts = writes.delete_run(run)
            messages.success(request, f"run {run.key} deleted ({counts['calls']} calls)")
            return redirect("cv-runs", slug=run.project.slug)
        _require(request.user, run.project, Membership.Role.EDITOR)
        error = _review_action(request, run, action)
        if error:
            messages.error(request, error)
        return redirect("cv-run-review", run_id=run.id)
    notes = run.review_notes.select_related("author", "call").prefetch_related("revisions__editor")
    role = role_of(request.user, run.project)
    context = {
        "run": run,
        "project": run.project,
        "notes": notes.order_by("created_at"),
        "labels": run.labels.order_by("name"),
        "bookmarks": Bookmark.objects.filter(call__run=run).select_related("call").order_by("call__seq"),
        "can_edit": role_at_least(role, Membership.Role.EDITOR),
        "is_admin": role_at_least(role, Membership.Role.ADMIN),
    }
    return render_page(request, "ctxview/review.html", {**context, "title": f"Review · {run.key}"})


def _review_action(request: HttpRequest, run, action: str) -> str | None:
    """Apply one form of the review page through ctxview.writes; returns its message when refused."""
    data, user = request.POST, request.user
    try:
        if action == "add_note":
            seq = data.get("call_seq", "")
            writes.add_note(
                run,
                user,
                body=data.get("body", ""),
                call_seq=writes.form_int(seq) if seq.strip() else None,
                item_id=data.get("item_id", ""),
            )
        elif action == "delete_note":
            note_id = writes.form_int(data.get("note_id", ""))
            # A number past the id column makes PostgreSQL refuse the query.
            fits = isinstance(note_id, int) and note_id <= 2**63 - 1
            note = run.review_notes.filter(id=note_id).first() if fits else None
            if note is None:
                return "no such note"
            writes.delete_note(note, user)
        elif action == "add_label":
            writes.add_label(run, user, name=data.get("name", ""), link=data.get("link", ""))
        elif action == "remove_label":
            writes.remove_label(run, data.get("name", ""))
        elif action in ("bookmark", "unbookmark"):
            call = writes.call_by_seq(run, writes.form_int(data.get("call_seq", "")))
            writes.set_bookmark(call, user, on=action == "bookmark")
        else:
            return f"unknown action {action!r}"
    except writes.Refused as exc:
        return str(exc)
    return None


@require_http_methods(["GET", "POST"])
@login_required
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
    if request.method == "POST":
        _require(request.user, project, Membership.Role.ADMIN)
        error = _settings_action(request, project, request.POST.get("action", ""))
        if error:
            messages.error(request, error)
        else:
            messages.success(request, "saved")
        return redirect("cv-project-settings", slug=project.slug)
    role = role_of(request.user, project)
    context = {
        "project": project,
        "is_admin": role_at_least(role, Membership.Role.ADMIN),
        "role": role,
        "patterns": "\n".join(f"{name} {pattern}" for name, pattern in project.redaction_patterns),
        "redaction_problems": project.redactor().unusable,
        "prices": json.dumps(project.prices, indent=1),
        "effective_prices": sorted(config_for(project).prices.items()),
        "members": Membership.objects.filter(project=project)
        .select_related("user")
        .order_by("user__username"),
        "roles": Membership.Role.choices,
    }
    return render_page(request, "ctxview/settings.html", {**context, "title": f"Settings · {project.name}"})


def _settings_action(request: HttpRequest, project, action: str) -> str | None:
    """Apply one form of the settings page through ctxview.writes; returns its message when refused."""
    data = request.POST
    try:
        if action == "policy":
            lines = [line.split(None, 1) for line in data.get("patterns", "").splitlines() if line.strip()]
            if any(len(entry) != 2 for entry in lines):
                return "each redaction line is a name, a space, and a regular expression"
            writes.update_policy(
                project,
                {
                    "retention_days": writes.form_int(data.get("retention_days", "")),
                    "raw_retention_days": writes.form_int(data.get("raw_retention_days", "")),
                    "hash_only": data.get("hash_only") == "on",
                    "redaction_patterns": lines,
                },
            )
        elif action == "prices":
            try:
                given = json.loads(data.get("prices") or "[]")
            except RecursionError:
                return "the prices are nested too deep to be a price table"
            except ValueError as exc:
                return f"the prices are not valid JSON: {exc}"
            writes.set_prices(project, given)
        elif action == "add_member":
            writes.add_member(
                project, username=data.get("username", ""), role=data.get("role", Membership.Role.VIEWER)
            )
        elif action == "remove_member":
            writes.remove_member(project, username=data.get("username", ""))
        else:
            return f"unknown action {action!r}"
    except writes.Refused as exc:
        return str(exc)
    return None
