"""Personal API tokens: made on the page or by ``createtoken``, shown once, stored as a hash; as
``Authorization: Bearer`` they read and write the API as their user with no CSRF token; read-only,
revoked, invalid and other users' tokens; ingest keys as before."""

import hashlib
import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview import writes
from ctxview.models import ApiToken, Note
from ingest.models import Membership, Run
from tests import factories
from tests.factories import chat_span, user_message

TOKEN = re.compile(r"cvt_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")


@pytest.fixture
def run(project):
    """Alice's project alpha with one run of one call."""
    request = ExportTraceServiceRequest()
    chat_span(
        request,
        trace_id=bytes(range(1, 17)),
        number=1,
        messages=[user_message("alpha's question")],
        attributes={"gen_ai.conversation.id": "alpha-run"},
    )
    factories.processed(project, request)
    return Run.objects.get(project=project)


def createtoken(*args) -> str:
    """The token ``createtoken`` prints: the last word of its last line."""
    out = StringIO()
    call_command("createtoken", *args, stdout=out)
    return out.getvalue().splitlines()[-1].split()[-1]


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def post_note(client, run, **headers):
    return client.post(
        f"/api/v1/runs/{run.id}/notes",
        json.dumps({"body": "written by a script"}),
        content_type="application/json",
        **headers,
    )


# --- The command ---------------------------------------------------------------------------------


def test_createtoken_prints_a_token_that_reads_the_users_runs(client, alice, run):
    token = createtoken("alice")
    assert token.startswith("cvt_")
    response = client.get("/api/v1/runs", **bearer(token))
    assert response.status_code == 200, response.content
    assert [row["key"] for row in response.json()["runs"]] == ["alpha-run"]
    assert client.get(f"/api/v1/runs/{run.id}", **bearer(token)).json()["key"] == "alpha-run"


def test_createtoken_makes_a_read_only_named_token(alice):
    token = createtoken("alice", "--read-only", "--name", "nightly export")
    row = ApiToken.objects.get()
    assert (row.user, row.read_only, row.name) == (alice, True, "nightly export")
    assert token.startswith(f"cvt_{row.token_id}_")


def test_createtoken_refuses_an_unknown_user(db):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        createtoken("nobody")
    assert not ApiToken.objects.exists()


# --- Reading and writing with a token ------------------------------------------------------------


def test_a_token_writes_with_no_csrf_token(alice, run):
    token = createtoken("alice")
    response = post_note(Client(enforce_csrf_checks=True), run, **bearer(token))
    assert response.status_code == 201, response.content
    assert Note.objects.get().author == alice


def test_a_session_without_the_csrf_token_is_still_refused(alice, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = post_note(client, run)
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    # A token anywhere but the Authorization header exempts nothing: the session still needs CSRF.
    response = post_note(client, run, HTTP_X_CTXVIEW_KEY=createtoken("alice"))
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]
    assert not Note.objects.exists()


def test_a_token_writes_only_what_its_users_role_allows(alice, bob, run):
    Membership.objects.create(project=run.project, user=bob, role=Membership.Role.VIEWER)
    token = createtoken("bob")
    assert Client().get(f"/api/v1/runs/{run.id}", **bearer(token)).status_code == 200
    response = post_note(Client(), run, **bearer(token))
    assert response.status_code == 403
    assert response.json() == {"error": "this needs the editor role in project alpha"}


def test_a_read_only_token_reads_but_gets_403_on_a_write(client, alice, run):
    token = createtoken("alice", "--read-only")
    assert client.get(f"/api/v1/runs/{run.id}", **bearer(token)).status_code == 200
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)(
            f"/api/v1/runs/{run.id}/notes", "{}", content_type="application/json", **bearer(token)
        )
        assert response.status_code == 403, method
        assert response.json() == {"error": "this API token is read-only: it cannot write"}
    assert client.delete(f"/api/v1/runs/{run.id}", **bearer(token)).status_code == 403
    assert Run.objects.filter(id=run.id).exists()
    assert not Note.objects.exists()


def test_a_revoked_token_gets_401_even_with_a_session(client, alice, run):
    token = createtoken("alice")
    writes.revoke_token(alice, ApiToken.objects.get().token_id)
    response = client.get("/api/v1/runs", **bearer(token))
    assert response.status_code == 401
    assert response.json() == {"error": "invalid or revoked API token"}
    client.force_login(alice)  # never the session instead of the token it was sent with
    assert client.get("/api/v1/runs", **bearer(token)).status_code == 401
    assert post_note(client, run, **bearer(token)).status_code == 401


@pytest.mark.parametrize("sent", ["cvt_", "cvt_0123456789ab_wrong", "cvt__secret"])
def test_an_invalid_token_gets_401(client, alice, sent):
    token = createtoken("alice")
    if sent == "cvt_0123456789ab_wrong":
        sent = token[: -len("wrong")] + "wrong"  # the right id, the wrong secret
    response = client.get("/api/v1/runs", **bearer(sent))
    assert response.status_code == 401
    assert response.json() == {"error": "invalid or revoked API token"}


def test_a_deactivated_users_token_gets_401(client, alice):
    token = createtoken("alice")
    alice.is_active = False
    alice.save()
    assert client.get("/api/v1/runs", **bearer(token)).status_code == 401


def test_a_token_sees_nothing_of_another_users_project(client, alice, bob, run):
    token = createtoken("bob")
    response = client.get("/api/v1/runs", **bearer(token))
    assert response.status_code == 200
    assert response.json()["runs"] == []
    assert client.get(f"/api/v1/runs/{run.id}", **bearer(token)).status_code == 404
    assert post_note(client, run, **bearer(token)).status_code == 404
    assert not Note.objects.exists()


def test_an_ingest_key_still_only_reads_where_its_owners_token_writes(client, alice, key, run):
    assert client.get(f"/api/v1/runs/{run.id}", **bearer(key)).status_code == 200
    response = post_note(client, run, **bearer(key))
    assert response.status_code == 403
    assert "an ingest key can only read" in response.json()["error"]
    assert post_note(client, run, **bearer(createtoken("alice"))).status_code == 201


def test_the_token_is_stored_only_as_its_hash(alice):
    token = createtoken("alice")
    secret = token.split("_", 2)[2]
    assert ApiToken.objects.get().token_hash == hashlib.sha256(token.encode()).hexdigest()
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            for row in cursor.fetchall():
                for value in row:
                    assert secret not in str(value), f"the token's secret is stored in {table}"


def test_last_use_is_recorded_at_most_once_a_minute(client, alice):
    token = createtoken("alice")
    assert ApiToken.objects.get().last_used_at is None
    client.get("/api/v1/runs", **bearer(token))
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    client.get("/api/v1/runs", **bearer(token))
    assert ApiToken.objects.get().last_used_at == first
    ApiToken.objects.update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/v1/runs", **bearer(token))
    assert ApiToken.objects.get().last_used_at > first - timedelta(seconds=1)
    assert ApiToken.objects.get().last_used_at <= timezone.now()


# --- The page ------------------------------------------------------------------------------------


def test_the_page_creates_a_token_and_shows_it_once(client, alice, run):
    client.force_login(alice)
    response = client.post("/tokens/new", {"name": "<b>nightly</b>", "read_only": "on"})
    assert response.status_code == 200
    page = response.content.decode()
    [token] = set(TOKEN.findall(page))
    assert "will not show it again" in page
    assert "no-store" in response["Cache-Control"] and 'hx-history="false"' in page  # kept nowhere
    assert "&lt;b&gt;nightly&lt;/b&gt;" in page and "<b>nightly" not in page
    row = ApiToken.objects.get()
    assert (row.user, row.read_only, row.name) == (alice, True, "<b>nightly</b>")
    assert Client().get("/api/v1/runs", **bearer(token)).status_code == 200
    assert post_note(Client(), run, **bearer(token)).status_code == 403  # read-only
    listed = client.get("/tokens/").content.decode()
    assert f"cvt_{row.token_id}_…" in listed and "read-only" in listed
    assert token not in listed and not TOKEN.search(listed)


def test_the_page_lists_only_the_users_own_tokens(client, alice, bob):
    writes.create_token(bob, name="bob's token")
    client.force_login(alice)
    response = client.get("/tokens/")
    assert response.status_code == 200
    assert b"bob&#x27;s token" not in response.content and b"No tokens yet" in response.content


def test_the_page_revokes_a_token(client, alice):
    row, token = writes.create_token(alice, name="old")
    client.force_login(alice)
    response = client.post(f"/tokens/{row.token_id}/revoke")
    assert (response.status_code, response["Location"]) == (302, "/tokens/")
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert Client().get("/api/v1/runs", **bearer(token)).status_code == 401
    assert b"revoked" in client.get("/tokens/").content


def test_another_users_token_cannot_be_revoked(client, alice, bob):
    row, token = writes.create_token(bob)
    client.force_login(alice)
    assert client.post(f"/tokens/{row.token_id}/revoke").status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None


def test_the_pages_forms_need_the_csrf_token(alice):
    row, _ = writes.create_token(alice)
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/tokens/new", {"name": "x"}).status_code == 403
    assert client.post(f"/tokens/{row.token_id}/revoke").status_code == 403
    assert ApiToken.objects.count() == 1 and ApiToken.objects.get().revoked_at is None


def test_the_page_needs_a_login_and_the_header_links_to_it(client, alice):
    response = client.get("/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    # A token is for the API only: in a page's request it is no login.
    response = client.get("/tokens/", **bearer(createtoken("alice")))
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    client.force_login(alice)
    assert b'href="/tokens/"' in client.get("/").content
