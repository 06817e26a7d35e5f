"""Who may see what: a user sees the projects they belong to; a superuser sees every project."""

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from ctxview.models import OutboundGrant
from ctxview.tokens import is_token
from ingest.keys import key_from_request, project_for_key
from ingest.models import Call, Membership, Project, Run


def projects_for_user(user) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(membership__user=user)


def get_project_for_user(user, slug: str, role: str | None = None) -> Project:
    """The project, or 404 when the user is not a member (or lacks ``role``: admin > editor > viewer)."""
    project = projects_for_user(user).filter(slug=slug).first()
    if project is None:
        raise Http404("no such project")
    if role and not user.is_superuser and not has_role(user, project, role):
        raise Http404("no such project")
    return project


_RANK = {Membership.Role.VIEWER: 0, Membership.Role.EDITOR: 1, Membership.Role.ADMIN: 2}


def role_of(user, project: Project) -> str | None:
    """The user's role in the project (a superuser is an admin everywhere); None for a stranger."""
    if not user.is_authenticated:
        return None
    if user.is_superuser:
        return Membership.Role.ADMIN
    return Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()


def role_at_least(actual: str | None, role: str) -> bool:
    """Viewer < editor < admin: an editor may do what a viewer may, an admin everything."""
    return actual is not None and _RANK[actual] >= _RANK[role]


def has_role(user, project: Project, role: str) -> bool:
    """Whether the user has ``role`` or a higher one in the project (``role_at_least``)."""
    return role_at_least(role_of(user, project), role)


def get_run_for_user(user, run_id: int) -> Run:
    run = Run.objects.filter(id=run_id, project__in=projects_for_user(user)).select_related("project").first()
    if run is None:
        raise Http404("no such run")
    return run


def get_call_for_user(user, call_id: int) -> Call:
    call = (
        Call.objects.filter(id=call_id, project__in=projects_for_user(user))
        .select_related("run", "run__project")
        .first()
    )
    if call is None:
        raise Http404("no such call")
    return call


class NotAuthenticated(Exception):
    pass


def ingest_key(request: HttpRequest) -> str | None:
    """The ingest key the request carries, or None; a personal API token (``cvt_…``) is no ingest key: its
    user is ``request.user`` (``ctxview.tokens.ApiTokenMiddleware``)."""
    key = key_from_request(request)
    return None if key is None or is_token(key) else key


def api_projects(request: HttpRequest) -> QuerySet[Project]:
    """Projects an API request may read: the key's project, or the projects of the user (logged in, or
    the user of a personal API token)."""
    key = ingest_key(request)
    if key is not None:
        project = project_for_key(key)
        if project is None:
            raise NotAuthenticated("invalid or revoked key")
        return Project.objects.filter(id=project.id)
    if request.user.is_authenticated:
        return projects_for_user(request.user)
    raise NotAuthenticated("send 'Authorization: Bearer <key>' or log in")


def outbound_off(project: Project) -> str | None:
    """Why the server may not call out for ``project`` (None: it may): the operator's switch for the
    instance, then an instance admin's grant for the project (anyone may create a project)."""
    if not settings.CTXVIEW_OUTBOUND_ENABLED:
        return (
            "outbound calls are off on this instance (an operator turns them on with "
            "CTXVIEW_OUTBOUND_ENABLED)"
        )
    if not OutboundGrant.objects.filter(project=project).exists():
        return (
            "this project may not make the server call out until an instance admin allows it on its "
            "settings page"
        )
    return None
