import json

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.keys import project_for_key
from ingest.models import IngestKey, Membership, Project, Run
from tests import factories
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)


def test_pages_need_a_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_login_page_renders(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b"Log in" in response.content


@pytest.mark.django_db
def test_logging_in_lands_on_the_runs_of_the_most_recently_active_project(client):
    user = factories.user("dana")
    quiet, _ = factories.project_with_key("quiet", owner=user)
    busy, _ = factories.project_with_key("busy", owner=user)
    for project in (quiet, busy):  # busy's run is the later one
        Run.objects.create(project=project, key=f"{project.slug}-run", key_source="test")
    landed = client.post("/login/", {"username": "dana", "password": "pw-dana"})
    assert (landed.status_code, landed["Location"]) == (302, "/projects/busy/runs/")
    client.logout()
    asked = client.post("/login/?next=/projects/quiet/", {"username": "dana", "password": "pw-dana"})
    assert asked["Location"] == "/projects/quiet/"  # a next is followed


@pytest.mark.django_db
def test_a_user_of_no_project_lands_on_the_projects_page(client):
    factories.user("erin")
    landed = client.post("/login/", {"username": "erin", "password": "pw-erin"})
    assert landed["Location"] == "/"


def test_a_user_sees_only_their_projects(client, alice, bob, project):
    factories.project_with_key("beta", owner=bob)
    client.force_login(alice)
    response = client.get("/")
    assert [row.slug for row in response.context["projects"]] == ["alpha"]
    assert client.get("/projects/alpha/").status_code == 200
    assert client.get("/projects/beta/").status_code == 404


def test_a_superuser_sees_every_project(client, project, bob):
    factories.project_with_key("beta", owner=bob)
    client.force_login(factories.user("root", superuser=True))
    assert [row.slug for row in client.get("/").context["projects"]] == ["alpha", "beta"]


def test_creating_a_project_makes_the_user_its_admin(client, alice):
    client.force_login(alice)
    response = client.post("/projects/new", {"name": "Support Agents"})
    assert response.status_code == 302
    project = Project.objects.get(slug="support-agents")
    assert Membership.objects.get(project=project, user=alice).role == "admin"


def test_creating_a_project_without_a_name_is_a_400(client, alice):
    client.force_login(alice)
    response = client.post("/projects/new", {"name": "  "})
    assert response.status_code == 400
    assert b"needs a name" in response.content


def test_a_new_key_is_shown_once_and_works(client, alice, project):
    client.force_login(alice)
    response = client.post("/projects/alpha/keys", {"name": "prod"})
    key = response.context["new_key"]
    assert key.encode() in response.content
    assert project_for_key(key) == project
    assert key.encode() not in client.get("/projects/alpha/").content
    assert IngestKey.objects.filter(project=project, name="prod").exists()


def test_revoking_a_key_stops_it(client, alice, project, key):
    client.force_login(alice)
    key_id = project.keys.get().key_id
    response = client.post(f"/projects/alpha/keys/{key_id}/revoke")
    assert response.status_code == 302
    assert project_for_key(key) is None


@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_only_admins_manage_keys(client, bob, project, key, role):
    Membership.objects.create(project=project, user=bob, role=role)
    client.force_login(bob)
    assert client.post("/projects/alpha/keys", {"name": "x"}).status_code == 404
    key_id = project.keys.get().key_id
    assert client.post(f"/projects/alpha/keys/{key_id}/revoke").status_code == 404
    assert project_for_key(key) == project


def test_project_page_escapes_what_clients_sent(client, alice, project):
    from ingest.models import RawBatch

    RawBatch.objects.create(
        project=project,
        signal="traces",
        body=b"",
        content_type="protobuf",
        wire_bytes=1,
        item_count=1,
        status="failed",
        error="<script>alert(1)</script>",
    )
    client.force_login(alice)
    content = client.get("/projects/alpha/").content
    assert b"<script>alert(1)</script>" not in content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in content


def test_run_and_call_pages_render_escaped_content_for_members_only(client, alice, bob, project):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from ingest.models import Call
    from tests.factories import chat_span, user_message

    request = ExportTraceServiceRequest()
    chat_span(
        request,
        trace_id=b"\x01" * 16,
        number=1,
        messages=[user_message("<img src=x onerror=alert(1)>")],
        attributes={"gen_ai.conversation.id": "<script>alert(1)</script>"},
    )
    factories.processed(project, request)
    call = Call.objects.get()

    client.force_login(alice)
    for path in (f"/projects/{project.slug}/runs/", f"/runs/{call.run_id}/", f"/calls/{call.id}/"):
        content = client.get(path).content
        assert b"<script>alert(1)</script>" not in content and b"<img src=x" not in content, path
    assert b"&lt;script&gt;" in client.get(f"/runs/{call.run_id}/").content
    assert b"&lt;img src=x" in client.get(f"/calls/{call.id}/").content

    client.force_login(bob)
    assert client.get(f"/runs/{call.run_id}/").status_code == 404
    assert client.get(f"/calls/{call.id}/").status_code == 404
    assert client.get(f"/projects/{project.slug}/runs/").status_code == 404


def test_a_tool_execution_whose_sizes_were_not_told_says_unknown_not_blank(client, alice, project, send):  # noqa: F811
    request = ExportTraceServiceRequest()
    trace = bytes(range(1, 17))
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup"}]}
    factories.chat_span(
        request,
        trace_id=trace,
        number=1,
        messages=[factories.user_message("Look it up.")],
        attributes={"gen_ai.output.messages": json.dumps([asked])},
    )
    tool = factories.chat_span(
        request,
        trace_id=trace,
        number=2,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.id": "call_1",
        },
    )
    tool.name = "execute_tool lookup"
    send(request)
    client.force_login(alice)
    call = Run.objects.get(project=project).calls.get()
    section = client.get(f"/calls/{call.id}/").content.decode().split("<h2>Tool executions", 1)[1]
    row = section.split("</section>", 1)[0].split("<tbody>", 1)[1]
    assert "<code>lookup</code>" in row and "call_1" in row
    # Arguments and result: the span told neither size, so neither cell is a blank that reads as nothing.
    assert row.count('<span class="muted">unknown</span>') == 2
