"""Review pages: a run's notes, labels, bookmarks and exports; a project's data policy, prices and members.

Plain forms (they work without JavaScript), Django's CSRF protection, and the same role rules as the API:
viewers read, editors write notes, labels and bookmarks, admins change the project's settings and members.
"""

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from ctxview import queries, writes
from ctxview.access import (
    get_project_for_user,
    get_run_for_user,
    has_role,
    outbound_off,
    role_at_least,
    role_of,
)
from ctxview.models import Bookmark, OutboundGrant, ReaskEndpoint
from ctxview.views_common import notes_region, notes_with_history, render_page
from ingest.analyse import config_for
from ingest.models import Membership


def _require(user, project, role: str) -> None:
    if not has_role(user, project, role):
        raise PermissionDenied(f"this needs the {role} role in project {project.slug}")


@require_GET
@login_required
def run_review(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    role = role_of(request.user, run.project)
    context = {
        "run": run,
        "project": run.project,
        "notes": notes_with_history(run.review_notes.all(), request.user, role),
        "labels": run.labels.order_by("name"),
        "bookmarks": Bookmark.objects.filter(call__run=run).select_related("call").order_by("call__seq"),
        "can_edit": role_at_least(role, Membership.Role.EDITOR),
        "is_admin": role_at_least(role, Membership.Role.ADMIN),
    }
    return render_page(request, "ctxview/review.html", {**context, "title": f"Review · {run.label[:80]}"})


# One URL per action of the review page (runs/<id>/review/<action>); each form's fields are converted
# and passed to ctxview.writes, which checks them as it does the API's.


def _add_note(data, run, user) -> None:
    seq = data.get("call_seq", "")
    writes.add_note(
        run,
        user,
        body=data.get("body", ""),
        call_seq=writes.form_int(seq) if seq.strip() else None,
        item_id=data.get("item_id", ""),
    )


def _note_of(data, run):
    note_id = writes.form_int(data.get("note_id", ""))
    # A number past the id column makes PostgreSQL refuse the query.
    fits = isinstance(note_id, int) and note_id <= 2**63 - 1
    note = run.review_notes.filter(id=note_id).first() if fits else None
    if note is None:
        raise writes.Refused("no such note", 404)
    return note


def _edit_note(data, run, user) -> None:
    writes.edit_note(_note_of(data, run), user, data.get("body", ""))


def _delete_note(data, run, user) -> None:
    writes.delete_note(_note_of(data, run), user)


def _add_label(data, run, user) -> None:
    writes.add_label(run, user, name=data.get("name", ""), link=data.get("link", ""))


def _remove_label(data, run, user) -> None:
    writes.remove_label(run, data.get("name", ""))


def _bookmark(data, run, user, on: bool = True) -> None:
    writes.set_bookmark(writes.call_by_seq(run, writes.form_int(data.get("call_seq", ""))), user, on)


def _unbookmark(data, run, user) -> None:
    _bookmark(data, run, user, on=False)


REVIEW_ACTIONS = {
    "add_note": _add_note,
    "edit_note": _edit_note,
    "delete_note": _delete_note,
    "add_label": _add_label,
    "remove_label": _remove_label,
    "bookmark": _bookmark,
    "unbookmark": _unbookmark,
}


@require_POST
@login_required
def run_review_action(request: HttpRequest, run_id: int, action: str) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    if action == "delete_run":
        _require(request.user, run.project, Membership.Role.ADMIN)
        counts = writes.delete_run(run)
        messages.success(request, f"run {run.key} deleted ({counts['calls']} calls)")
        return redirect("cv-runs", slug=run.project.slug)
    if action not in REVIEW_ACTIONS:
        raise Http404("no such action on the review page")
    _require(request.user, run.project, Membership.Role.EDITOR)
    error, status = "", 200
    try:
        REVIEW_ACTIONS[action](request.POST, run, request.user)
    except writes.Refused as exc:
        error, status = str(exc), exc.status
    back = _back(request.POST, run)
    if back is None:
        if error:
            messages.error(request, error)
        return redirect("cv-run-review", run_id=run.id)
    url, region = back
    if getattr(request, "htmx", None) and request.htmx.target == "notes":
        # The notes card of the page the form is on, written again in place (the page is not reloaded).
        context = notes_region(request.user, run, **region, error=error)
        return render(request, "ctxview/_notes.html", context, status=status)
    if error:
        messages.error(request, error)
    return redirect(f"{url}#notes")


def _back(data, run) -> tuple[str, dict] | None:
    """The call or item page a form of its notes card came from (its address, and what it shows), or
    None for the review page's own forms."""
    if data.get("back") == "call":
        try:
            call = writes.call_by_seq(run, writes.form_int(data.get("call_seq", "")))
        except writes.Refused:
            return None
        return queries.call_url(call.id), {"call": call}
    item_id = data.get("item_id", "")
    if data.get("back") == "item" and item_id and len(item_id) <= writes.ITEM_ID_LIMIT:
        return queries.item_url(run.id, item_id), {"item_id": item_id}
    return None


@require_GET
@login_required
def project_settings(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
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
        "reask_endpoint": ReaskEndpoint.objects.filter(project=project).first(),
        "providers": ReaskEndpoint.Provider.values,
        "outbound_off": outbound_off(project),
        "outbound_enabled": settings.CTXVIEW_OUTBOUND_ENABLED,
        "outbound_granted": OutboundGrant.objects.filter(project=project).exists(),
        "reask_deadline": settings.CTXVIEW_REASK_DEADLINE_SECONDS,
    }
    return render_page(request, "ctxview/settings.html", {**context, "title": f"Settings · {project.name}"})


# One URL per form of the settings page (projects/<slug>/settings/<action>), each through ctxview.writes.


def _policy(data, project, user) -> None:
    lines = [line.split(None, 1) for line in data.get("patterns", "").splitlines() if line.strip()]
    if any(len(entry) != 2 for entry in lines):
        raise writes.Refused("each redaction line is a name, a space, and a regular expression")
    writes.update_policy(
        project,
        {
            "retention_days": writes.form_int(data.get("retention_days", "")),
            "raw_retention_days": writes.form_int(data.get("raw_retention_days", "")),
            "hash_only": data.get("hash_only") == "on",
            "redaction_patterns": lines,
        },
    )


def _prices(data, project, user) -> None:
    try:
        given = json.loads(data.get("prices") or "[]")
    except RecursionError:
        raise writes.Refused("the prices are nested too deep to be a price table") from None
    except ValueError as exc:
        raise writes.Refused(f"the prices are not valid JSON: {exc}") from None
    writes.set_prices(project, given)


def _add_member(data, project, user) -> None:
    writes.add_member(
        project, username=data.get("username", ""), role=data.get("role", Membership.Role.VIEWER)
    )


def _remove_member(data, project, user) -> None:
    writes.remove_member(project, username=data.get("username", ""))


def _reask(data, project, user) -> None:
    if data.get("remove"):
        writes.remove_reask_endpoint(project)
        return
    writes.set_reask_endpoint(
        project,
        user,
        provider=data.get("provider", ""),
        base_url=data.get("base_url", ""),
        model=data.get("model", ""),
        key=data.get("key", ""),
    )


def _outbound(data, project, user) -> None:
    if not user.is_superuser:
        raise writes.Refused("only an instance admin (a superuser) lets a project make the server call out")
    if data.get("allow") == "1":
        writes.grant_outbound(project, user)
    else:
        writes.revoke_outbound(project)


SETTINGS_ACTIONS = {
    "policy": _policy,
    "prices": _prices,
    "add_member": _add_member,
    "remove_member": _remove_member,
    "reask": _reask,
    "outbound": _outbound,
}


@require_POST
@login_required
def project_settings_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
    if action not in SETTINGS_ACTIONS:
        raise Http404("no such action on the settings page")
    _require(request.user, project, Membership.Role.ADMIN)
    try:
        SETTINGS_ACTIONS[action](request.POST, project, request.user)
    except writes.Refused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "saved")
    return redirect("cv-project-settings", slug=project.slug)
