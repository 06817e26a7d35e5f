"""Who may read and write what: every route × every principal × every method it takes, against one table.

The principals: anonymous; a logged-in user of no project (stranger); project alpha's viewer, editor and
owner (its admin); beta's owner; an ingest key of alpha and one of beta; alpha's editor's personal API
token (the API as the editor, no session); an instance admin (superuser).
Every URL names alpha's objects, so beta's owner and beta's key probe cross-project access. ``TABLE``
holds the answer each cell must give; a route of the URL conf without a row fails
``test_every_route_has_a_row``. Each cell runs in its own transaction on one world built per module, so
an allowed write (a deleted run) does not disturb the next cell; after every refused one (and every
outsider's request) nothing of alpha's has changed, after every allowed one something has (unless the
route writes nothing of alpha's), and an outsider's answer holds none of alpha's text. A method a row does
not name is a 405, even for the instance admin.
"""

import json
import re
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.test import Client, TestCase
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview import exchange, writes
from ctxview.models import (
    AlertEpisode,
    ApiToken,
    Bookmark,
    Label,
    Monitor,
    Note,
    NoteRevision,
    OutboundGrant,
    Probe,
    ReaskEndpoint,
)
from ctxview.panels import run_panels
from ctxview.views_monitors import MONITOR_ACTIONS
from ctxview.views_review import REVIEW_ACTIONS, SETTINGS_ACTIONS
from ingest.keys import create_key
from ingest.models import Call, IngestKey, Membership, Project, RawBatch, Run
from tests import factories
from tests.factories import assistant_message, user_message

Role = Membership.Role

# The instance admin last (admin:logout's row names the others as PRINCIPALS[:-1]).
PRINCIPALS = (
    "anon",
    "stranger",
    "viewer",
    "editor",
    "owner",
    "owner_b",
    "key_a",
    "key_b",
    "editor_token",
    "superuser",
)
# Those who send no session cookie: a page sends them to the login page.
NO_SESSION = ("anon", "key_a", "key_b", "editor_token")
# Those who belong to no part of alpha: whatever they do, alpha is unchanged and its text never shown.
OUTSIDERS = ("anon", "stranger", "owner_b", "key_b")
MEMBER_ROLE = {"viewer": Role.VIEWER, "editor": Role.EDITOR, "owner": Role.ADMIN, "superuser": Role.ADMIN}
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

# Redirects, told apart by where they go: a 302 to a login page is a refusal.
LOGIN = "302 to /login/"
ADMIN_LOGIN = "302 to /admin/login/"
# A page's form refused with a message (Django's messages) and a 302 back to the page: nothing changes.
BACK = "302 back, refused"
REFUSALS = (LOGIN, ADMIN_LOGIN, BACK)

SECRETS = (b"alpha's secret question", b"alpha's note", b"alpha-run")


# --- The rules the table is written with ---------------------------------------------------------------


def everyone(status) -> dict:
    return dict.fromkeys(PRINCIPALS, status)


def at_least(principal: str, role: str | None) -> bool:
    return role is not None and principal in MEMBER_ROLE and _rank(MEMBER_ROLE[principal]) >= _rank(role)


def _rank(role: str) -> int:
    return (Role.VIEWER, Role.EDITOR, Role.ADMIN).index(role)


def page(ok=200, role: str | None = Role.VIEWER, lacking=403, **overrides) -> dict:
    """A page of alpha's (a session): a key or a token is no session (to the login page), an outsider gets
    a 404, a member with ``role`` or above ``ok``, a member below it ``lacking``."""
    cells = {}
    for who in PRINCIPALS:
        if who in NO_SESSION:
            cells[who] = LOGIN
        elif who in ("stranger", "owner_b"):
            cells[who] = 404
        else:
            cells[who] = ok if at_least(who, role) else lacking
    return cells | overrides


def api(ok=200, role: str | None = Role.VIEWER, key=None, lacking=403, **overrides) -> dict:
    """Alpha's object through the API: 401 without credentials, 404 for an outsider (beta's key too),
    ``ok`` for a member with ``role`` or above, ``lacking`` below it; alpha's key gets ``key`` (a key
    reads; it writes only an import), by default as a viewer when ``role`` is viewer, else 403. The
    editor's token gets what the editor gets."""
    cells = {"anon": 401, "stranger": 404, "owner_b": 404, "key_b": 404}
    for who in ("viewer", "editor", "owner", "superuser"):
        cells[who] = ok if at_least(who, role) else lacking
    cells["key_a"] = key if key is not None else (ok if role == Role.VIEWER else 403)
    cells |= overrides
    return cells | {"editor_token": overrides.get("editor_token", cells["editor"])}


def session(ok=200, **overrides) -> dict:
    """A page of no project (the projects list, a new project): any session, not a key or a token."""
    return {who: LOGIN if who in NO_SESSION else ok for who in PRINCIPALS} | overrides


def staff(ok=200, **overrides) -> dict:
    """Django's admin: the instance admin only; anyone else to the admin's login page."""
    return {who: ok if who == "superuser" else ADMIN_LOGIN for who in PRINCIPALS} | overrides


NOT_ALLOWED = everyone(405)


@dataclass(frozen=True)
class Row:
    """A route's answers by method and principal, and what its requests carry.

    ``query`` is added to every request's URL; ``params`` fill the route's parameters (default: alpha's
    objects of that name); ``form`` is a page's POST body, ``json`` an API write's, ``otlp`` names a
    receiver's ("traces" or "logs": a fresh export each time). Strings in them are formatted with alpha's
    objects (``{run_id}``)."""

    GET: dict
    POST: dict
    PUT: dict | None = None
    PATCH: dict | None = None
    DELETE: dict | None = None
    query: str = ""
    params: dict = field(default_factory=dict)
    method_params: dict = field(default_factory=dict)  # a method's own parameters, over ``params``
    form: dict | None = None
    json: dict | str | None = None  # "export": alpha's run as exported
    otlp: str | None = None
    url: str | None = None  # for an unnamed regular-expression route
    # An allowed write changes alpha (a 302 may also be a form refused with a message), except on a route
    # that writes nothing of alpha's (a login, a new project, a page that only reads).
    keeps: bool = False

    def methods(self) -> dict[str, dict]:
        return {method: getattr(self, method) for method in METHODS if getattr(self, method) is not None}


def ui(ok=200, **row) -> Row:
    """A read-only page of alpha's (GET; every other method a 405 before any check)."""
    return Row(GET=page(ok), POST=NOT_ALLOWED, **row)


def api_get(ok=200, **row) -> Row:
    return Row(GET=api(ok), POST=NOT_ALLOWED, **row)


def form_post(cells: dict, **row) -> Row:
    """A page's form (POST only: a GET is a 405 before any check)."""
    return Row(GET=NOT_ALLOWED, POST=cells, **row)


def admin_row(get=200, post=200, **row) -> Row:
    return Row(GET=staff(get), POST=staff(post), **row)


# Note edits and deletions: an editor may change only their own notes (alpha's note is its owner's).
_NOTE_CHANGE = page(302, role=Role.EDITOR, editor=BACK)
_NOTE_CHANGE_API = {"editor": 403, "editor_token": 403}

# The review page's actions: who may (POST), and the form each sends.
_REVIEW = {
    "add_note": (page(302, role=Role.EDITOR), {"body": "a reviewer's note"}),
    "edit_note": (_NOTE_CHANGE, {"note_id": "{note_id}", "body": "changed"}),
    "delete_note": (_NOTE_CHANGE, {"note_id": "{note_id}"}),
    "add_label": (page(302, role=Role.EDITOR), {"name": "regression"}),
    "remove_label": (page(302, role=Role.EDITOR), {"name": "incident"}),
    "bookmark": (page(302, role=Role.EDITOR), {"call_seq": "2"}),
    "unbookmark": (page(302, role=Role.EDITOR), {"call_seq": "1"}),
    "delete_run": (page(302, role=Role.ADMIN), {}),
}

# The settings page's actions (an admin's; letting a project call out is the instance admin's alone).
_SETTINGS = {
    "policy": {"retention_days": "30", "raw_retention_days": "7", "patterns": "email \\S+@\\S+"},
    "prices": {"prices": '[{{"model": "m1", "input": 1, "output": 2}}]'},  # formatted: {{ is {
    "add_member": {"username": "stranger", "role": "viewer"},
    "remove_member": {"username": "viewer"},
    "reask": {"remove": "1"},
    "outbound": {"allow": "1"},
}

# The monitors page's actions (an admin's), and the form each sends.
_MONITORS = {
    "create": {"template": "window-size", "name": "from the page"},
    "delete": {"monitor_id": "{monitor_id}"},
    "test": {"monitor_id": "{monitor_id}"},
    "mute": {"monitor_id": "{monitor_id}", "minutes": "30"},
}

_VIEWER_LOGIN = {"username": "viewer", "password": "pw-viewer"}
_ROOT_LOGIN = {"username": "root", "password": "pw-root"}
_NEW_PASSWORD = {"new_password1": "An0ther-long-pass", "new_password2": "An0ther-long-pass"}

TABLE: dict[str, Row] = {
    # OTLP receivers: POST with a key; the export lands in the key's project (beta's key: in beta).
    "cv-otlp-traces": Row(GET=NOT_ALLOWED, POST=everyone(401) | {"key_a": 200, "key_b": 200}, otlp="traces"),
    "cv-otlp-logs": Row(GET=NOT_ALLOWED, POST=everyone(401) | {"key_a": 200, "key_b": 200}, otlp="logs"),
    # The JSON API.
    "cv-api-openapi": Row(GET=everyone(200), POST=everyone(200), keeps=True),  # public; any method reads it
    "cv-api-docs": Row(GET=everyone(200), POST=NOT_ALLOWED, keeps=True),  # the reference: public too
    "cv-api-schema-run-export": Row(
        GET=everyone(200), POST=NOT_ALLOWED, keeps=True
    ),  # public, as the OpenAPI
    # The runs list answers everyone with their own runs (an outsider: none of alpha's).
    "cv-api-runs": Row(GET=everyone(200) | {"anon": 401}, POST=NOT_ALLOWED, query="project=alpha"),
    "cv-api-run": Row(GET=api(), POST=NOT_ALLOWED, DELETE=api(200, role=Role.ADMIN)),
    "cv-api-run-calls": api_get(),
    "cv-api-run-findings": api_get(),
    "cv-api-item": api_get(),
    "cv-api-call": api_get(query="content=1"),
    "cv-api-trace": api_get(),
    "cv-api-run-notes": Row(GET=api(), POST=api(201, role=Role.EDITOR), json={"body": "a note"}),
    "cv-api-note": Row(
        GET=NOT_ALLOWED,
        POST=NOT_ALLOWED,
        PATCH=api(200, role=Role.EDITOR) | _NOTE_CHANGE_API,
        DELETE=api(204, role=Role.EDITOR) | _NOTE_CHANGE_API,
        json={"body": "edited"},
    ),
    "cv-api-run-labels": Row(GET=api(), POST=api(200, role=Role.EDITOR), json={"name": "regression"}),
    "cv-api-run-label": Row(GET=NOT_ALLOWED, POST=NOT_ALLOWED, DELETE=api(204, role=Role.EDITOR)),
    "cv-api-call-bookmark": Row(
        GET=NOT_ALLOWED,
        POST=NOT_ALLOWED,
        PUT=api(204, role=Role.EDITOR),
        DELETE=api(204, role=Role.EDITOR),
        method_params={"PUT": {"call_id": "{other_call_id}"}},  # call 1 is bookmarked, call 2 not
    ),
    "cv-api-run-export": api_get(),
    "cv-api-run-csv": api_get(),
    # An import: an admin's session, or the project's own ingest key.
    "cv-api-project-import": Row(GET=NOT_ALLOWED, POST=api(201, role=Role.ADMIN, key=201), json="export"),
    "cv-api-project-policy": Row(
        GET=api(), POST=NOT_ALLOWED, PATCH=api(200, role=Role.ADMIN), json={"retention_days": 45}
    ),
    "cv-api-project-prices": Row(
        GET=api(),
        POST=NOT_ALLOWED,
        PUT=api(200, role=Role.ADMIN),
        json={"prices": [{"model": "m1", "input": 1, "output": 2}]},
    ),
    # Monitors: members (and the project's key) read them and the alerts; admins change them.
    "cv-api-monitors": Row(
        GET=api(),
        POST=api(201, role=Role.ADMIN),
        json={"name": "new", "kind": "window_size", "params": {"above_tokens": 5}},
    ),
    "cv-api-monitor": Row(
        GET=api(),
        POST=NOT_ALLOWED,
        PATCH=api(200, role=Role.ADMIN),
        DELETE=api(204, role=Role.ADMIN),
        json={"name": "renamed"},
    ),
    "cv-api-monitor-test": Row(GET=NOT_ALLOWED, POST=api(202, role=Role.ADMIN), json={}),
    "cv-api-alerts": api_get(),
    "cv-api-run-replay": api_get(),
    "cv-api-run-probes": Row(
        GET=api(),
        POST=api(201, role=Role.EDITOR),
        DELETE=api(204, role=Role.EDITOR),
        query="id={probe_id}",
        json={"kind": "text", "value": "needle"},
    ),
    # Any other path under /api/, by any method: a JSON 404 (no CSRF page for a POST).
    "api/": Row(**dict.fromkeys(METHODS, everyone(404)), keeps=True),
    "cv-api-not-found": Row(**dict.fromkeys(METHODS, everyone(404)), keeps=True),
    # Logging in and out: open to all (the login is the viewer's own).
    # Django's LoginView takes a PUT as a POST, but Django parses no form of a PUT: a failed login, 200.
    "cv-login": Row(GET=everyone(200), POST=everyone(302), PUT=everyone(200), form=_VIEWER_LOGIN, keeps=True),
    "cv-logout": Row(GET=NOT_ALLOWED, POST=everyone(302), form={}, keeps=True),
    # Pages.
    "cv-projects": Row(GET=session(), POST=NOT_ALLOWED),
    "cv-jump": Row(GET=page(302), POST=NOT_ALLOWED, query="q=%231&run={run_id}"),
    # Personal API tokens: each user's own page; a token of another's (the viewer's) is a 404 to revoke.
    "cv-tokens": Row(GET=session(), POST=NOT_ALLOWED),
    "cv-token-create": form_post(session(200), form={"name": "a script"}, keeps=True),
    "cv-token-revoke": form_post(session(404, viewer=302), form={}),
    "cv-project-create": form_post(session(302), form={"name": "Gamma"}, keeps=True),
    "cv-project": ui(),
    # Keys: a member below admin is told the project does not exist (get_project_for_user's role).
    "cv-key-create": form_post(page(200, role=Role.ADMIN, lacking=404), form={"name": "new key"}),
    "cv-key-revoke": form_post(page(302, role=Role.ADMIN, lacking=404), form={}),
    "cv-runs": ui(),
    "cv-run": ui(),
    "cv-run-live": ui(286),  # the run is idle (updated an hour ago): its last strip, and polling stops
    "cv-explain": ui(),
    "cv-compare": ui(),
    "cv-compare-item": ui(query="item={item_id}"),
    "cv-item": ui(query="id={item_id}"),
    "cv-replay": ui(),
    # A viewer's probe is refused with the page's 400 ("needs the editor role"), not a 403.
    "cv-replay-probes": form_post(
        page(302, role=Role.EDITOR, lacking=400), form={"kind": "text", "value": "x"}
    ),
    "cv-call": ui(),
    "cv-call-content": ui(query="pos=0"),
    "cv-run-review": ui(),
    "cv-project-settings": ui(),
    "cv-monitors": ui(),
    **{
        f"cv-monitors-action/{action}": form_post(
            page(302, role=Role.ADMIN), form=body, params={"action": action}
        )
        for action, body in _MONITORS.items()
    },
    **{f"cv-run-panel/{slug}": ui(params={"slug": slug}) for slug in run_panels()},
    **{
        f"cv-run-review-action/{action}": form_post(cells, form=body, params={"action": action})
        for action, (cells, body) in _REVIEW.items()
    },
    **{
        f"cv-project-settings-action/{action}": form_post(
            page(302, role=Role.ADMIN) | ({"owner": BACK} if action == "outbound" else {}),
            form=body,
            params={"action": action},
        )
        for action, body in _SETTINGS.items()
    },
    # Django's admin: staff only (no member of a project is staff). The objects are alpha's viewer and a
    # group; superuser cells are what Django's admin answers to these bodies.
    "admin:index": admin_row(keeps=True),
    "admin:login": Row(
        GET=everyone(200) | {"superuser": 302}, POST=everyone(302), form=_ROOT_LOGIN, keeps=True
    ),
    # Anyone but staff is sent to the admin's index (then to its login page); the instance admin's logout
    # is a POST, and goes where ctxview's does (LOGOUT_REDIRECT_URL).
    "admin:logout": Row(
        GET=staff(405, **dict.fromkeys(PRINCIPALS[:-1], 302)), POST=everyone(302), form={}, keeps=True
    ),
    "admin:password_change": admin_row(
        200, 302, form={"old_password": "pw-root", **_NEW_PASSWORD}, keeps=True
    ),
    "admin:password_change_done": admin_row(200, 405),
    "admin:autocomplete": admin_row(403, 405),  # no model asked for: Django's 403
    "admin:jsi18n": admin_row(200, 405),
    "admin:view_on_site": admin_row(404, 404),  # a user has no page of its own
    "admin:app_list": admin_row(params={"app_label": "auth"}, keeps=True),
    "admin:auth_group_changelist": admin_row(
        200, 302, form={"action": "delete_selected", "_selected_action": "{group_id}", "post": "yes"}
    ),
    "admin:auth_group_add": admin_row(200, 302, form={"name": "alpha-editors"}),
    "admin:auth_group_history": admin_row(params={"object_id": "{group_id}"}, keeps=True),
    "admin:auth_group_delete": admin_row(200, 302, params={"object_id": "{group_id}"}, form={"post": "yes"}),
    "admin:auth_group_change": admin_row(
        200, 302, params={"object_id": "{group_id}"}, form={"name": "renamed"}
    ),
    "admin/auth/group/<path:object_id>/": admin_row(302, 302, params={"object_id": "{group_id}"}, keeps=True),
    "admin:auth_user_password_change": admin_row(
        200,
        302,
        params={"id": "{viewer_id}"},
        form={"usable_password": "true", "password1": "An0ther-long-pass", "password2": "An0ther-long-pass"},
    ),
    "admin:auth_user_changelist": admin_row(
        200, 302, form={"action": "delete_selected", "_selected_action": "{viewer_id}", "post": "yes"}
    ),
    "admin:auth_user_add": admin_row(
        200,
        302,
        form={
            "username": "newcomer",
            "usable_password": "true",
            "password1": "An0ther-long-pass",
            "password2": "An0ther-long-pass",
        },
        keeps=True,  # a new user is no member of alpha's
    ),
    "admin:auth_user_history": admin_row(params={"object_id": "{viewer_id}"}, keeps=True),
    "admin:auth_user_delete": admin_row(200, 302, params={"object_id": "{viewer_id}"}, form={"post": "yes"}),
    "admin:auth_user_change": admin_row(
        200,
        302,
        params={"object_id": "{viewer_id}"},
        form={
            "username": "viewer-renamed",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    ),
    "admin/auth/user/<path:object_id>/": admin_row(302, 302, params={"object_id": "{viewer_id}"}, keeps=True),
    "admin/(?P<url>.*)$": admin_row(404, 404, url="/admin/no-such-page/"),
}

# Routes whose one URL parameter names one of several things, each with its own rule: a row per thing.
VARIANTS = {
    "cv-run-panel": lambda: list(run_panels()),  # <slug>
    "cv-run-review-action": lambda: [*REVIEW_ACTIONS, "delete_run"],  # <action>
    "cv-project-settings-action": lambda: list(SETTINGS_ACTIONS),  # <action>
    "cv-monitors-action": lambda: list(MONITOR_ACTIONS),  # <action>
}


# --- The routes and the table's check -------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    key: str  # its name (with the admin's namespace), or its pattern when it has none
    name: str | None
    pattern: str
    params: tuple[str, ...]


def routes(resolver=None, prefix: str = "", namespace: str = "") -> list[Route]:
    """Every URL pattern of the URL conf, the admin's included."""
    found = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            found += routes(entry, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            name = f"{namespace}{entry.name}" if entry.name else None
            params = tuple(entry.pattern.regex.groupindex)
            pattern = prefix + str(entry.pattern)
            found.append(Route(name or pattern, name, pattern, params))
    return found


def required_keys(found: list[Route]) -> list[str]:
    keys = []
    for route in found:
        if route.key in VARIANTS:
            keys += [f"{route.key}/{variant}" for variant in VARIANTS[route.key]()]
        else:
            keys.append(route.key)
    return keys


def check_table(table: dict[str, Row], found: list[Route]) -> None:
    """Every route has a row (every variant its own), every row a route, and every row a complete GET
    and POST (the other methods where the route takes them)."""
    keys = required_keys(found)
    missing = [key for key in keys if key not in table]
    assert not missing, f"routes without a row in the authorisation table: {', '.join(missing)}"
    stale = [key for key in table if key not in keys]
    assert not stale, f"rows of the authorisation table for no route: {', '.join(stale)}"
    for key, row in table.items():
        for method, cells in row.methods().items():
            assert set(cells) == set(PRINCIPALS), f"{key} {method}: a cell for each principal"


def route_of(key: str) -> Route:
    base = key.split("/", 1)[0] if key.split("/", 1)[0] in VARIANTS else key
    return next(route for route in ROUTES if route.key == base)


ROUTES = routes()
CELLS = [
    (key, method, who)
    for key, row in TABLE.items()
    for method, cells in row.methods().items()
    for who in PRINCIPALS
]


def test_every_route_has_a_row():
    check_table(TABLE, ROUTES)


def test_a_route_without_a_row_fails_by_name():
    for key in ("cv-run", "cv-run-review-action/delete_run", "admin:auth_user_change"):
        partial = {name: row for name, row in TABLE.items() if name != key}
        with pytest.raises(
            AssertionError, match=f"without a row in the authorisation table: {re.escape(key)}\n"
        ):
            check_table(partial, ROUTES)
    with pytest.raises(AssertionError, match="for no route: cv-gone"):
        check_table({**TABLE, "cv-gone": ui()}, ROUTES)
    incomplete = {**TABLE, "cv-run": Row(GET=page(), POST={who: 405 for who in PRINCIPALS if who != "anon"})}
    with pytest.raises(AssertionError, match="cv-run POST: a cell for each principal"):
        check_table(incomplete, ROUTES)


# --- The world: two projects, their people and keys, alpha's run and review ----------------------------


def _chat_request(trace_id: bytes, number: int, text: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=trace_id,
        number=number,
        messages=[user_message(text)],
        attributes={"gen_ai.conversation.id": "alpha-run"},
    )
    return request


def _build() -> dict:
    people = {name: factories.user(name) for name in ("stranger", "viewer", "editor", "owner", "owner_b")}
    people["superuser"] = factories.user("root", superuser=True)
    alpha, key_a = factories.project_with_key("alpha", owner=people["owner"])
    for name in ("viewer", "editor"):
        Membership.objects.create(project=alpha, user=people[name], role=name)
    _beta, key_b = factories.project_with_key("beta", owner=people["owner_b"])
    create_key(alpha, name="spare")  # the key the revoke route names
    _row, editor_token = writes.create_token(people["editor"], name="editor's script")
    viewer_token, _ = writes.create_token(people["viewer"], name="spare")  # the token the revoke route names
    trace_id = b"\x0a" * 16
    history = [user_message("alpha's secret question")]
    requests = [
        _chat_request(trace_id, 1, "alpha's secret question"),
        _chat_request(trace_id, 2, "alpha's secret question"),
    ]
    factories.chat_span(
        requests[1],
        trace_id=trace_id,
        number=3,
        messages=[*history, assistant_message("an answer"), user_message("and then?")],
        attributes={"gen_ai.conversation.id": "alpha-run"},
    )
    client = Client()
    for request in requests:
        with TestCase.captureOnCommitCallbacks(execute=True):
            response = client.post(
                "/v1/traces",
                request.SerializeToString(),
                content_type="application/x-protobuf",
                HTTP_AUTHORIZATION=f"Bearer {key_a}",
            )
        assert response.status_code == 200, response.content
    run = Run.objects.get(project=alpha)
    call = run.calls.get(seq=1)
    owner = people["owner"]
    note = Note.objects.create(project=alpha, run=run, author=owner, body="alpha's note")
    Label.objects.create(project=alpha, run=run, name="incident", created_by=owner)
    Bookmark.objects.create(project=alpha, call=call, created_by=owner)
    probe = Probe.objects.create(project=alpha, run=run, kind="text", value="secret", created_by=owner)
    ReaskEndpoint.objects.create(
        project=alpha, provider="anthropic", base_url="https://models.example", sealed_key="x", model="m1"
    )
    group = Group.objects.create(name="alpha-reviewers")
    monitor = Monitor.objects.create(
        project=alpha,
        name="alpha's monitor",
        kind="window_size",
        params={"above_tokens": 10},
        channels=[{"type": "email", "to": "oncall@alpha.example"}],
    )
    # What alpha's admin and alpha's key import: a run of a third project (alpha's own is in alpha already).
    source, source_key = factories.project_with_key("source")
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.post(
            "/v1/traces",
            factories.trace_request(spans=2).SerializeToString(),
            content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {source_key}",
        )
    assert response.status_code == 200, response.content
    assert run.call_count >= 2, run.call_count
    Run.objects.filter(id=run.id).update(updated_at=timezone.now() - timedelta(hours=1))
    return {
        "people": people,
        "keys": {"key_a": key_a, "key_b": key_b, "editor_token": editor_token},
        "export": exchange.export_run(Run.objects.get(project=source)),
        "objects": {
            "slug": alpha.slug,
            "run_id": run.id,
            "call_id": call.id,
            "other_call_id": run.calls.get(seq=2).id,
            "note_id": note.id,
            "key_id": IngestKey.objects.get(project=alpha, name="spare").key_id,
            "token_id": viewer_token.token_id,
            "item_id": call.items[0]["id"],
            "trace_id": call.trace_id,
            "name": "incident",
            "rest": f"v1/runs/{run.id}/unknown",
            "probe_id": probe.id,
            "monitor_id": monitor.id,
            "group_id": group.id,
            "viewer_id": people["viewer"].id,
            "object_id": people["viewer"].id,
            "content_type_id": ContentType.objects.get_for_model(get_user_model()).id,
        },
        "alpha": alpha,
        "queries": [queryset.query.sql_with_params() for queryset in _alpha_rows(alpha)],
    }


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Built once, inside a transaction rolled back after the module; each cell's own transaction (the
    ``django_db`` mark's) is rolled back inside it."""
    from ctxview.celery import app as celery_app

    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    with django_db_blocker.unblock(), transaction.atomic():
        try:
            built = _build()
        finally:
            celery_app.conf.task_always_eager = eager
        # One client for every cell, its cookies cleared before each: a new one would load the middleware
        # again, whitenoise's scan of the static files with it (a third of a second a cell).
        built["client"] = Client()
        # A session per person, made once (a login per cell took a third of the test's time): a cell sends
        # its cookie; a cell that logs out or in changes the session only in its own transaction.
        built["sessions"] = {}
        for who, person in built["people"].items():
            client = Client()
            client.force_login(person)
            built["sessions"][who] = client.cookies[settings.SESSION_COOKIE_NAME].value
        # Each cell starts from this state: its transaction is rolled back.
        built["before"] = snapshot(built["queries"])
        yield built
        transaction.set_rollback(True)


def _alpha_rows(alpha: Project) -> list:
    """Querysets of alpha's rows, as compared before and after a request."""
    users = get_user_model().objects.filter(membership__project=alpha).order_by("id")
    fields = ("slug", "name", "retention_days", "raw_retention_days", "hash_only", "redaction_patterns")
    return [
        Project.objects.filter(id=alpha.id).values_list(*fields, "prices"),
        Membership.objects.filter(project=alpha).order_by("id").values_list("user_id", "role"),
        users.values_list("username", "password", "is_active", "is_staff", "is_superuser"),
        IngestKey.objects.filter(project=alpha).order_by("id").values_list("key_id", "revoked_at"),
        # Alpha's people's API tokens (not when each was last used: every request of a token writes that).
        ApiToken.objects.filter(user__membership__project=alpha)
        .order_by("id")
        .values_list("token_id", "read_only", "revoked_at"),
        Run.objects.filter(project=alpha).order_by("id").values_list("id", "key", "call_count"),
        Call.objects.filter(project=alpha).order_by("id").values_list("id", "seq"),
        RawBatch.objects.filter(project=alpha).order_by("id").values_list("id", "status"),
        Note.objects.filter(project=alpha).order_by("id").values_list("id", "body"),
        NoteRevision.objects.filter(note__project=alpha).order_by("id").values_list("id"),
        Label.objects.filter(project=alpha).order_by("id").values_list("name", "link"),
        Bookmark.objects.filter(project=alpha).order_by("id").values_list("call_id"),
        Probe.objects.filter(project=alpha).order_by("id").values_list("id", "kind", "value"),
        ReaskEndpoint.objects.filter(project=alpha).values_list("base_url", "model"),
        OutboundGrant.objects.filter(project=alpha).values_list("id"),
        Group.objects.order_by("id").values_list("name"),
        Monitor.objects.filter(project=alpha).order_by("id").values_list("id", "name", "muted_until"),
        AlertEpisode.objects.filter(monitor__project=alpha).order_by("id").values_list("id"),
    ]


def snapshot(queries: list[tuple[str, tuple]]) -> list:
    """The rows of ``_alpha_rows``, read with their SQL compiled once (the ORM's compiling them for
    every cell took most of the test's time)."""
    with connection.cursor() as cursor:
        found = []
        for sql, params in queries:
            cursor.execute(sql, params)
            found.append(cursor.fetchall())
        return found


# --- The matrix -------------------------------------------------------------------------------------------


def _fill(value, objects: dict):
    if isinstance(value, str):
        return value.format(**objects)
    if isinstance(value, dict):
        return {name: _fill(entry, objects) for name, entry in value.items()}
    if isinstance(value, list):
        return [_fill(entry, objects) for entry in value]
    return value


def url_of(key: str, row: Row, objects: dict, method: str = "GET") -> str:
    route = route_of(key)
    params = row.params | row.method_params.get(method, {})
    if row.url is not None:
        url = row.url
    else:
        kwargs = {}
        for name in route.params:
            assert name in params or name in objects, f"{key}: a parameter {name!r} the test does not know"
            kwargs[name] = _fill(str(params.get(name, objects.get(name))), objects)
        if route.name:
            url = reverse(route.name, kwargs=kwargs)
        else:
            url = "/" + route.pattern
            for name, value in kwargs.items():
                url = url.replace(f"<path:{name}>", value).replace(f"<{name}>", value)
    return f"{url}?{_fill(row.query, objects)}" if row.query else url


def _otlp(kind: str) -> bytes:
    if kind == "traces":
        return factories.trace_request(spans=1).SerializeToString()
    return factories.logs_request(records=1).SerializeToString()


def send(client: Client, method: str, url: str, row: Row, world: dict, headers: dict):
    if method == "GET":
        return client.get(url, headers=headers)
    if row.otlp:
        return client.post(url, _otlp(row.otlp), content_type="application/x-protobuf", headers=headers)
    if row.json is not None:
        body = world["export"] if row.json == "export" else _fill(row.json, world["objects"])
        return client.generic(method, url, json.dumps(body), content_type="application/json", headers=headers)
    form = _fill(row.form or {}, world["objects"])
    if method == "POST":
        return client.post(url, form, headers=headers)
    # Sent as a form is, though Django parses a form only from a POST.
    return client.generic(method, url, urlencode(form), "application/x-www-form-urlencoded", headers=headers)


def check_status(response, expected) -> str | None:
    """What is wrong with the answer, or None."""
    got = response.status_code
    location = response.get("Location", "")
    if expected == LOGIN:
        ok = got == 302 and location.startswith("/login/")
    elif expected == ADMIN_LOGIN:
        ok = got == 302 and location.startswith("/admin/login/")
    elif expected == BACK:
        ok = got == 302 and not location.startswith(("/login/", "/admin/login/"))
    else:
        ok = got == expected
    return None if ok else f"expected {expected}, got {got} {location}".rstrip()


@pytest.mark.django_db
@pytest.mark.parametrize(("key", "method", "who"), CELLS, ids=[f"{k}-{m}-{w}" for k, m, w in CELLS])
def test_cell(world, key, method, who):
    row = TABLE[key]
    expected = row.methods()[method][who]
    client = world["client"]
    client.cookies.clear()
    headers = {}
    if who in world["keys"]:
        headers["Authorization"] = f"Bearer {world['keys'][who]}"
    elif who != "anon":
        client.cookies[settings.SESSION_COOKIE_NAME] = world["sessions"][who]
    url = url_of(key, row, world["objects"], method)
    response = send(client, method, url, row, world, headers)
    problem = check_status(response, expected)
    assert problem is None, f"{method} {url} as {who}: {problem}: {response.content[:300]!r}"
    allowed_write = method != "GET" and who not in OUTSIDERS and expected not in REFUSALS and expected < 400
    changed = snapshot(world["queries"]) != world["before"]
    if not allowed_write:
        assert not changed, f"{method} {url} as {who} changed alpha"
    elif not row.keeps:
        assert changed, f"{method} {url} as {who}: allowed, but alpha is unchanged (a refused form?)"
    if who in OUTSIDERS:
        content = b"".join(response.streaming_content) if response.streaming else response.content
        for secret in SECRETS:
            assert secret not in content, f"{method} {url} as {who} shows {secret!r}"


# Routes that answer any method: Django's admin (its own views) and the public OpenAPI document.
ANY_METHOD = ("admin", "cv-api-openapi")


@pytest.mark.django_db
def test_a_method_no_row_names_is_not_allowed_even_for_the_instance_admin(world):
    """So the table names every method a route takes: any other is a 405, before anything is done."""
    client = world["client"]
    client.cookies.clear()
    client.force_login(world["people"]["superuser"])
    wrong = []
    for key, row in TABLE.items():
        if key.startswith(ANY_METHOD):
            continue
        url = url_of(key, row, world["objects"])
        for method in set(METHODS) - set(row.methods()):
            with transaction.atomic():
                response = client.generic(method, url, "{}", content_type="application/json")
                transaction.set_rollback(True)
            if response.status_code != 405:
                wrong.append(f"{method} {url}: {response.status_code}")
    assert not wrong, "methods the table does not name answer: " + "; ".join(wrong)
    assert snapshot(world["queries"]) == world["before"]
