"""Review pages: a run's notes, labels, bookmarks and exports; a project's data policy, prices and members.

Plain forms (they work without JavaScript), Django's CSRF protection, and the same role rules as the API:
viewers read, editors write notes, labels and bookmarks, admins change the project's settings and members.
"""

import json

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from ctxview.access import get_project_for_user, get_run_for_user, has_role, role_at_least, role_of
from ctxview.models import Bookmark, Label, Note
from ctxview.views_common import render_page
from ingest.analyse import config_for
from ingest.models import Membership
from ingest.redact import PatternError, Redactor
from ingest.retention import delete_runs


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
            counts = delete_runs(run.project_id, [run.id])
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


def _number(value: str, maximum: int) -> int | None:
    """A form's whole number, or None: ASCII digits up to ``maximum`` only. ``"²".isdigit()`` is true but
    int() refuses it, and a number past an integer column makes PostgreSQL refuse the query."""
    if not (value.isascii() and value.isdigit()) or int(value) > maximum:
        return None
    return int(value)


def _numbered_call(run, seq: str):
    """The run's call numbered ``seq`` (as the form sent it), or None."""
    number = _number(seq, 2**31 - 1)
    return None if number is None else run.calls.filter(seq=number).first()


def _review_action(request: HttpRequest, run, action: str) -> str | None:
    """Apply one form of the review page; returns a message when the input is wrong."""
    data = request.POST
    if action == "add_note":
        body = data.get("body", "").strip()
        if not body or len(body) > 20_000:
            return "a note needs some text (at most 20,000 characters)"
        call = None
        if data.get("call_seq", "").strip():
            call = _numbered_call(run, data["call_seq"])
            if call is None:
                return f"call {data['call_seq']} is not a call of this run"
        Note.objects.create(
            project=run.project,
            run=run,
            call=call,
            item_id=data.get("item_id", "").strip()[:500],
            author=request.user,
            body=body,
        )
    elif action == "delete_note":
        note_id = _number(data.get("note_id") or "", 2**63 - 1)
        note = None if note_id is None else run.review_notes.filter(id=note_id).first()
        if note is None:
            return "no such note"
        if note.author_id != request.user.id and not has_role(
            request.user, run.project, Membership.Role.ADMIN
        ):
            return "only the note's author or an admin may delete it"
        note.delete()
    elif action == "add_label":
        name = data.get("name", "").strip().lower()
        link = data.get("link", "").strip()
        if not name or len(name) > 64:
            return "a label needs a name of at most 64 characters"
        if link and not link.startswith(("http://", "https://")):
            return "the link must be an http(s) URL"
        Label.objects.update_or_create(
            run=run, name=name, defaults={"project": run.project, "link": link, "created_by": request.user}
        )
    elif action == "remove_label":
        run.labels.filter(name=data.get("name", "")).delete()
    elif action in ("bookmark", "unbookmark"):
        call = _numbered_call(run, data.get("call_seq") or "")
        if call is None:
            return "no such call in this run"
        if action == "bookmark":
            Bookmark.objects.get_or_create(
                call=call, defaults={"project": run.project, "created_by": request.user}
            )
        else:
            Bookmark.objects.filter(call=call).delete()
    else:
        return f"unknown action {action!r}"
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
    data = request.POST
    if action == "policy":
        try:
            retention, raw = int(data.get("retention_days", "")), int(data.get("raw_retention_days", ""))
        except ValueError:
            return "retention must be a whole number of days"
        if not (1 <= retention <= 3650 and 1 <= raw <= 3650):
            return "retention must be from 1 to 3650 days"
        patterns = [line.split(None, 1) for line in data.get("patterns", "").splitlines() if line.strip()]
        if any(len(entry) != 2 for entry in patterns):
            return "each redaction line is a name, a space, and a regular expression"
        try:
            Redactor.from_patterns(tuple(entry) for entry in patterns)
        except PatternError as exc:
            return str(exc)
        project.retention_days, project.raw_retention_days = retention, raw
        project.hash_only = data.get("hash_only") == "on"
        project.redaction_patterns = [list(entry) for entry in patterns]
        project.save()
    elif action == "prices":
        from ctxview.review_api import clean_prices, reanalyse

        try:
            given = json.loads(data.get("prices") or "[]")
        except RecursionError:
            return "the prices are nested too deep to be a price table"
        except ValueError as exc:
            return f"the prices are not valid JSON: {exc}"
        try:
            rows = clean_prices(given)
        except ValueError as exc:
            return str(exc)
        with transaction.atomic():
            project.prices = rows
            project.save(update_fields=["prices"])
            reanalyse(project)
    elif action == "add_member":
        user = get_user_model().objects.filter(username=data.get("username", "").strip()).first()
        if user is None:
            return f"no user named {data.get('username', '')!r}"
        role = data.get("role", Membership.Role.VIEWER)
        if role not in Membership.Role.values:
            return "unknown role"
        Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    elif action == "remove_member":
        membership = Membership.objects.filter(
            project=project, user__username=data.get("username", "")
        ).first()
        if membership is None:
            return "no such member"
        admins = Membership.objects.filter(project=project, role=Membership.Role.ADMIN)
        if membership.role == Membership.Role.ADMIN and admins.count() == 1:
            return "a project keeps at least one admin"
        membership.delete()
    else:
        return f"unknown action {action!r}"
    return None
