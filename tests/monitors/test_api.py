"""The monitors' API contract: create (an admin), list, change, delete, test, and the alerts."""

import json

import pytest

from ctxview import writes
from ctxview.models import Monitor, OutboundGrant
from ingest.models import Membership
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(alice, project):
    return writes.create_token(alice, name="script")[1]


def call(client, method, path, token=None, body=None, **headers):
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    data = json.dumps(body) if body is not None else ""
    return client.generic(method, path, data, content_type="application/json", **headers)


def test_an_admin_creates_lists_changes_and_deletes_a_monitor(client, project, token, settings):
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    OutboundGrant.objects.create(project=project)
    url = "/api/v1/projects/alpha/monitors"
    body = {
        "name": "new cause",
        "kind": "cache_break_cause",
        "params": {},
        "channels": [
            {"type": "webhook", "url": "https://hooks.example.com/ctx"},
            {"type": "email", "to": "oncall@example.com"},
        ],
    }
    response = call(client, "POST", url, token, body)
    assert response.status_code == 201, response.content
    created = response.json()
    secret = created["channels"][0].pop("secret")
    assert len(secret) >= 30 and "sealed_secret" not in created["channels"][0]
    assert created["channels"] == [
        {"type": "webhook", "url": "https://hooks.example.com/ctx", "hint": secret[-4:]},
        {"type": "email", "to": "oncall@example.com"},
    ]
    assert (created["kind"], created["state"], created["scope"], created["params"]) == (
        "cache_break_cause",
        "ok",
        {},
        {},
    )
    assert secret not in json.dumps(Monitor.objects.get().channels)  # stored sealed
    listed = call(client, "GET", url, token).json()["monitors"]
    assert [monitor["id"] for monitor in listed] == [created["id"]]
    detail = f"{url}/{created['id']}"
    changed = call(
        client,
        "PATCH",
        detail,
        token,
        {"name": "renamed", "scope": {"service": "checkout"}, "mute_minutes": 30},
    )
    assert changed.status_code == 200 and changed.json()["scope"] == {"service": "checkout"}
    assert changed.json()["muted_until"] is not None
    assert call(client, "POST", f"{detail}/test", token).status_code == 202
    alerts = call(client, "GET", "/api/v1/projects/alpha/alerts?tests=1", token).json()["alerts"]
    assert [alert["test"] for alert in alerts] == [True]
    assert call(client, "GET", "/api/v1/projects/alpha/alerts", token).json() == {"alerts": []}
    out_of_bounds = (("monitor=-2", "monitor must be between 0"), ("limit=501", "limit must be between 1"))
    for query, said in out_of_bounds:
        refused = call(client, "GET", f"/api/v1/projects/alpha/alerts?{query}", token)
        assert (refused.status_code, said in refused.json()["error"]) == (400, True), query
    assert call(client, "DELETE", detail, token).status_code == 204
    assert not Monitor.objects.exists()


@pytest.mark.parametrize(
    "body, message",
    [
        ({"name": "x", "kind": "nope"}, "kind must be one of"),
        ({"name": "x", "kind": "hit_rate_drop", "params": {}}, "needs params.below"),
        ({"name": "x", "kind": "hit_rate_drop", "params": {"below": 2}}, "params.below must be from 0 to 1"),
        (
            {"name": "x", "kind": "cache_break_cause", "params": {"cause": "sunspots"}},
            "no cause of cache breaks",
        ),
        ({"name": "x", "kind": "window_size", "params": {"above_tokens": 9, "colour": 1}}, "not colour"),
        (
            {"name": "x", "kind": "finding_type", "channels": [{"type": "email", "to": "nobody"}]},
            "not an email",
        ),
        ({"name": "", "kind": "finding_type"}, "name must be a non-empty string"),
    ],
)
def test_a_bad_monitor_is_refused_with_a_sentence(client, project, token, body, message):
    response = call(client, "POST", "/api/v1/projects/alpha/monitors", token, body)
    assert response.status_code == 400 and message in response.json()["error"]


def test_a_webhook_needs_the_instance_s_leave_to_call_out_and_a_public_address(
    client, project, token, settings
):
    body = {
        "name": "x",
        "kind": "finding_type",
        "channels": [{"type": "webhook", "url": "https://hooks.example.com/"}],
    }
    refused = call(client, "POST", "/api/v1/projects/alpha/monitors", token, body)
    assert refused.status_code == 403 and "outbound calls are off" in refused.json()["error"]
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    OutboundGrant.objects.create(project=project)
    local = {**body, "channels": [{"type": "webhook", "url": "http://127.0.0.1:9/hook"}]}
    response = call(client, "POST", "/api/v1/projects/alpha/monitors", token, local)
    assert response.status_code == 400 and "loopback" in response.json()["error"]


def test_a_member_below_admin_reads_but_cannot_write(client, project, bob):
    Membership.objects.create(project=project, user=bob, role="editor")
    bob_token = writes.create_token(bob, name="b")[1]
    body = {"name": "x", "kind": "finding_type"}
    assert call(client, "POST", "/api/v1/projects/alpha/monitors", bob_token, body).status_code == 403
    assert call(client, "GET", "/api/v1/projects/alpha/monitors", bob_token).json() == {"monitors": []}
    _other, _ = factories.project_with_key("beta", owner=bob)
    assert call(client, "GET", "/api/v1/projects/beta/alerts", bob_token).status_code == 200


def test_the_session_needs_csrf(client, alice, project):
    client.force_login(alice)
    checked = type(client)(enforce_csrf_checks=True)
    checked.force_login(alice)
    response = call(
        checked, "POST", "/api/v1/projects/alpha/monitors", None, {"name": "x", "kind": "finding_type"}
    )
    assert response.status_code == 403 and "CSRF" in response.json()["error"]


def test_the_pages_show_monitors_and_escape_what_traces_sent(client, alice, project):
    from django.utils import timezone

    from ctxview.models import AlertEpisode

    monitor = Monitor.objects.create(project=project, name="m", kind="cache_break_cause", state="firing")
    AlertEpisode.objects.create(
        monitor=monitor,
        started_at=timezone.now(),
        cause={"name": "system_changed", "item": "<script>x</script>", "bytes": {"old": "<b>", "new": "<i>"}},
    )
    client.force_login(alice)
    page = client.get("/projects/alpha/monitors").content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script>x</script>" not in page
    runs = client.get("/projects/alpha/runs/").content.decode()
    assert "alert-banner" in runs and "&lt;script&gt;" in runs and "<script>x" not in runs
    created = client.post("/projects/alpha/monitors/create", {"template": "hit-rate-drop"})
    assert created.status_code == 302 and Monitor.objects.filter(name="Cache hit rate drop").exists()
