"""Project isolation on every route: three users, two projects, every URL pattern, every method.

Alice belongs to project alpha, Bob to beta, Carol to neither. Each route is called with beta's objects
(as Alice, as Carol and anonymously): the answer is never a success, and beta's data is unchanged. A new
route with a parameter this test does not know fails the test, so every route gets covered.
"""

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview import writes
from ctxview.models import ApiToken, Label, Monitor, Note
from ingest.models import Call, IngestKey, Run
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

PUBLIC = {"login/", "logout/", "api/v1/openapi.json", "api/v1/docs", "api/v1/schema/run-export"}
REFUSED = {302, 401, 403, 404, 405}
METHODS = ("get", "post", "put", "patch", "delete")


def routes(resolver=None, prefix=""):
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if str(entry.pattern).startswith("admin/"):
                continue  # Django's admin: staff only, its own tests
            yield from routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.pattern.converters


@pytest.fixture
def beta(send, bob, client, django_capture_on_commit_callbacks):  # noqa: F811
    """Project beta, Bob's, with a run, calls, a note and a label."""
    project, key = factories.project_with_key("beta", owner=bob)
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=b"\x0b" * 16,
        number=1,
        messages=[user_message("beta's secret question")],
        attributes={"gen_ai.conversation.id": "beta-run"},
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/v1/traces",
            request.SerializeToString(),
            content_type="application/x-protobuf",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )
    assert response.status_code == 200
    run = Run.objects.get(project=project)
    call = Call.objects.get(run=run)
    Note.objects.create(project=project, run=run, author=bob, body="beta's note")
    Label.objects.create(project=project, run=run, name="incident")
    token, _ = writes.create_token(bob, name="bob's script")
    monitor = Monitor.objects.create(
        project=project, name="beta's monitor", kind="window_size", params={"above_tokens": 10}, channels=[]
    )
    return {
        "slug": project.slug,
        "run_id": run.id,
        "call_id": call.id,
        "other_call_id": call.id,
        "note_id": Note.objects.get().id,
        "key_id": IngestKey.objects.filter(project=project).first().key_id,
        "token_id": token.token_id,  # Bob's own: no one else revokes it
        "monitor_id": monitor.id,
        "item_id": call.items[0]["id"],
        "trace_id": call.trace_id,
        "name": "incident",
        "seq": 1,
        "turn": 1,
        "a": call.id,
        "b": call.id,
        "rest": f"v1/runs/{run.id}/unknown",
        # The review and settings pages' actions: the run's deletion is the one that must never pass.
        "action": "delete_run",
    }


def url_for(pattern: str, converters: dict, objects: dict) -> str:
    import re

    def fill(match):
        name = match.group(2)
        assert name in objects, f"route {pattern!r} has a parameter {name!r} this test does not know: add it"
        return str(objects[name])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", fill, pattern)


def snapshot():
    return (
        list(Run.objects.values_list("id", "key", "call_count")),
        list(Note.objects.values_list("id", "body")),
        list(Label.objects.values_list("id", "name")),
        list(IngestKey.objects.values_list("key_id", "revoked_at")),
        list(ApiToken.objects.filter(user__username="bob").values_list("token_id", "revoked_at")),
        list(Monitor.objects.values_list("id", "name", "params", "muted_until")),
    )


def test_no_route_serves_or_changes_another_projects_data(client, alice, beta):
    carol = factories.user("carol")
    before = snapshot()
    checked = 0
    for pattern, converters in routes():
        if pattern in PUBLIC or pattern.startswith("static/"):
            continue
        url = url_for(pattern, converters, beta)
        for who in (alice, carol, None):
            client.logout()
            if who is not None:
                client.force_login(who)
            for method in METHODS:
                if method == "get":
                    response = client.get(url)
                else:
                    response = getattr(client, method)(url, "{}", content_type="application/json")
                # A route with no object in its URL (a list, "create a project") may answer a member of
                # no project or another one, but with nothing of beta's in it and without touching beta.
                if converters or who is None:
                    assert response.status_code in REFUSED, (
                        f"{method.upper()} {url} as {who or 'anonymous'}: {response.status_code}"
                    )
                assert b"beta-run" not in response.content
                assert b"beta's secret question" not in response.content
                assert b"beta's note" not in response.content
                checked += 1
    assert snapshot() == before
    assert checked > 100
