"""The monitors through the API: a project's monitors (GET: its members and its ingest key; POST, PATCH,
DELETE and a test notification: its admins, by session with CSRF or a personal API token) and its alerts
(the episodes, newest first)."""

from django.http import HttpRequest, HttpResponse, JsonResponse

from ctxview.access import api_projects
from ctxview.api_common import int_query, json_body, require_role, review_view
from ctxview.models import AlertEpisode, Monitor
from ctxview.monitors import engine
from ctxview.monitors.writes import create_monitor, update_monitor
from ctxview.writes import Refused
from ingest.models import Membership, Project

ADMIN = Membership.Role.ADMIN


def _project(request: HttpRequest, slug: str) -> Project:
    project = api_projects(request).filter(slug=slug).first()
    if project is None:
        raise Refused("no such project", 404)
    return project


def _monitor(project: Project, monitor_id: int) -> Monitor:
    monitor = Monitor.objects.filter(project=project, id=monitor_id).select_related("project").first()
    if monitor is None:
        raise Refused("no such monitor", 404)
    return monitor


def _with_secrets(monitor: Monitor, made: list[str | None]) -> dict:
    """The monitor, and the webhook secrets made for it now (shown this once)."""
    data = monitor.to_dict()
    for channel, secret in zip(data["channels"], made, strict=False):
        if secret:
            channel["secret"] = secret
    return data


@review_view(["GET", "POST"])
def project_monitors(request: HttpRequest, slug: str) -> JsonResponse:
    project = _project(request, slug)
    if request.method == "POST":
        require_role(request, project, ADMIN)
        monitor, made = create_monitor(project, request.user, json_body(request))
        return JsonResponse(_with_secrets(monitor, made), status=201)
    monitors = Monitor.objects.filter(project=project).select_related("project").order_by("name")
    return JsonResponse({"monitors": [monitor.to_dict() for monitor in monitors]})


@review_view(["GET", "PATCH", "DELETE"])
def project_monitor(request: HttpRequest, slug: str, monitor_id: int) -> HttpResponse:
    project = _project(request, slug)
    monitor = _monitor(project, monitor_id)
    if request.method == "GET":
        return JsonResponse(monitor.to_dict())
    require_role(request, project, ADMIN)
    if request.method == "DELETE":
        monitor.delete()
        return HttpResponse(status=204)
    made = update_monitor(monitor, json_body(request))
    return JsonResponse(_with_secrets(monitor, made))


@review_view(["POST"])
def project_monitor_test(request: HttpRequest, slug: str, monitor_id: int) -> JsonResponse:
    """A test notification to every channel of the monitor (sent by a task; the episode shows how it went)."""
    project = _project(request, slug)
    monitor = _monitor(project, monitor_id)
    require_role(request, project, ADMIN)
    episode = engine.test_fire(monitor)
    return JsonResponse(episode.to_dict(), status=202)


@review_view(["GET"])
def project_alerts(request: HttpRequest, slug: str) -> JsonResponse:
    """The project's episodes, newest first (``?monitor=ID``, ``?limit=`` up to 500; test-fires with
    ``?tests=1``)."""
    project = _project(request, slug)
    episodes = AlertEpisode.objects.filter(monitor__project=project)
    monitor_id = int_query(request, "monitor", 0, 0, 2**62)
    if monitor_id:
        episodes = episodes.filter(monitor_id=monitor_id)
    if request.GET.get("tests") != "1":
        episodes = episodes.filter(test=False)
    limit = int_query(request, "limit", 100, 1, 500)
    episodes = (
        episodes.select_related("monitor").prefetch_related("deliveries").order_by("-started_at", "-id")
    )
    return JsonResponse({"alerts": [episode.to_dict() for episode in episodes[:limit]]})
