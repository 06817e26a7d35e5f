"""A project's Monitors page: its monitors and their state, new ones from a template, a test
notification, muting, and the history of episodes with their cause and links to the run and call.

Plain forms (they work without JavaScript) through ``ctxview.monitors.writes``, the API's checks; the
page polls its status region with htmx while a monitor fires. Viewers read it, admins change it.
"""

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from ctxview import writes
from ctxview.access import get_project_for_user, has_role, outbound_off, role_at_least, role_of
from ctxview.models import AlertEpisode, Monitor
from ctxview.monitors import engine
from ctxview.monitors.writes import TEMPLATES, create_monitor, update_monitor
from ctxview.views_common import render_page
from ingest.models import Call, Membership

EPISODES_SHOWN = 50


def call_links(episodes) -> dict[tuple[int, int], int]:
    """The call id of each episode's first call (run, seq), in one query."""
    wanted = {
        (e.cause.get("run"), e.cause.get("seq"))
        for e in episodes
        if e.cause.get("run") and e.cause.get("seq")
    }
    if not wanted:
        return {}
    runs = {run for run, _ in wanted}
    rows = Call.objects.filter(run_id__in=runs, seq__in={seq for _, seq in wanted}).values_list(
        "run_id", "seq", "id"
    )
    return {(run, seq): call_id for run, seq, call_id in rows if (run, seq) in wanted}


@require_GET
@login_required
def monitors_page(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
    role = role_of(request.user, project)
    monitors = list(Monitor.objects.filter(project=project).order_by("name"))
    episodes = list(
        AlertEpisode.objects.filter(monitor__project=project)
        .select_related("monitor")
        .prefetch_related("deliveries")
        .order_by("-started_at", "-id")[:EPISODES_SHOWN]
    )
    links = call_links(episodes)
    for episode in episodes:
        episode.call_id = links.get((episode.cause.get("run"), episode.cause.get("seq")))
    context = {
        "project": project,
        "role": role,
        "is_admin": role_at_least(role, Membership.Role.ADMIN),
        "monitors": monitors,
        "firing": [monitor for monitor in monitors if monitor.state == Monitor.State.FIRING],
        "episodes": episodes,
        "templates": [
            (key, name, kind, json.dumps(params)) for key, (name, kind, params) in TEMPLATES.items()
        ],
        "outbound_off": outbound_off(project),
        "title": f"Monitors · {project.name}",
    }
    return render_page(request, "ctxview/monitors.html", context, regions=("page", "status"))


def _create(data, project, user) -> str:
    template = TEMPLATES.get(data.get("template", ""))
    if template is None:
        raise writes.Refused("choose one of the templates")
    default_name, kind, params = template
    if data.get("params", "").strip():
        try:
            params = json.loads(data["params"])
        except ValueError:
            raise writes.Refused("the parameters must be a JSON object") from None
    channels = []
    target = data.get("target", "").strip()
    if target:
        kind_of_channel = data.get("channel", "webhook")
        key = "to" if kind_of_channel == "email" else "url"
        channel = {"type": kind_of_channel, key: target}
        if kind_of_channel == "webhook" and data.get("secret", "").strip():
            channel["secret"] = data["secret"].strip()
        channels.append(channel)
    scope = {name: data.get(name, "") for name in ("service", "model", "label", "agent")}
    monitor, made = create_monitor(
        project,
        user,
        {
            "name": data.get("name", "").strip() or default_name,
            "kind": kind,
            "params": params,
            "scope": scope,
            "channels": channels,
        },
    )
    secret = next((secret for secret in made if secret), None)
    return f"monitor {monitor.name!r} created" + (
        f"; its webhook's signing secret (shown once): {secret}" if secret else ""
    )


def _monitor_of(data, project) -> Monitor:
    monitor = Monitor.objects.filter(project=project, id=writes.form_int(data.get("monitor_id", ""))).first()
    if monitor is None:
        raise writes.Refused("no such monitor")
    return monitor


def _delete(data, project, user) -> str:
    monitor = _monitor_of(data, project)
    monitor.delete()
    return f"monitor {monitor.name!r} deleted"


def _test(data, project, user) -> str:
    monitor = _monitor_of(data, project)
    if not monitor.channels:
        raise writes.Refused(f"monitor {monitor.name!r} has no channels to test")
    engine.test_fire(monitor)
    return f"a test notification of {monitor.name!r} is on its way: its delivery shows below"


def _mute(data, project, user) -> str:
    monitor = _monitor_of(data, project)
    minutes = writes.form_int(data.get("minutes", "60"))
    update_monitor(monitor, {"mute_minutes": minutes})
    return f"monitor {monitor.name!r} muted" if minutes else f"monitor {monitor.name!r} unmuted"


MONITOR_ACTIONS = {"create": _create, "delete": _delete, "test": _test, "mute": _mute}


@require_POST
@login_required
def monitors_action(request: HttpRequest, slug: str, action: str) -> HttpResponse:
    project = get_project_for_user(request.user, slug)
    if action not in MONITOR_ACTIONS:
        raise Http404("no such action on the monitors page")
    if not has_role(request.user, project, Membership.Role.ADMIN):
        raise PermissionDenied(f"this needs the admin role in project {project.slug}")
    try:
        done = MONITOR_ACTIONS[action](request.POST, project, request.user)
    except writes.Refused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done or "saved")
    return redirect("cv-monitors", slug=project.slug)
