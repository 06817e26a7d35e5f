"""One validation path: the review page and the API give the same answer for the same input (ctxview.writes),
and the runs list and the API read the same filters the same way."""

import json
from datetime import timedelta
from urllib.parse import quote

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview import writes
from ctxview.models import Label, Note
from ingest.models import Membership, Run
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import TRACE, send  # noqa: F401  (the fixture)


@pytest.fixture
def run(send, project):  # noqa: F811
    for number in (1, 2):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=[user_message(f"question {number}")],
            attributes={"gen_ai.conversation.id": "writes"},
        )
        send(request)
    return Run.objects.get(project=project)


@pytest.fixture
def editor(client, run, bob):
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    return client


def page_message(client, run, action: str, form: dict) -> str | None:
    """What the review page says to the form: its error message, or None when it was done."""
    response = client.post(f"/runs/{run.id}/review/{action}", form, follow=True)
    assert response.status_code == 200
    errors = [str(m) for m in response.context["messages"] if m.level_tag == "error"]
    return errors[0] if errors else None


def api_message(client, url: str, body: dict) -> str | None:
    response = client.post(url, json.dumps(body), content_type="application/json")
    if response.status_code in (200, 201):
        return None
    assert response.status_code == 400, response.content
    return response.json()["error"]


LONG_LINK = "https://t.example/" + "x" * 500


@pytest.mark.parametrize(
    "fields, refused",
    [
        ({"name": "incident", "link": LONG_LINK}, "link is longer than 500 characters"),
        ({"name": "incident", "link": "javascript:alert(1)"}, "link must be an http(s) URL"),
        ({"name": "x" * 65}, "name is longer than 64 characters"),
        ({"name": "  "}, "name must be a non-empty string"),
        ({"name": "Incident", "link": "https://t.example/INC-1"}, None),
    ],
)
def test_a_label_gets_the_same_answer_from_the_page_and_the_api(editor, run, fields, refused):
    from_page = page_message(editor, run, "add_label", {"link": "", **fields})
    page_labels = list(Label.objects.values_list("name", "link"))
    Label.objects.all().delete()
    from_api = api_message(editor, f"/api/v1/runs/{run.id}/labels", fields)
    assert from_page == from_api == refused
    assert list(Label.objects.values_list("name", "link")) == page_labels
    assert bool(page_labels) == (refused is None)
    if refused is None:
        assert page_labels == [("incident", fields["link"])]


@pytest.mark.parametrize(
    "fields, refused",
    [
        ({"body": "x", "item_id": "tool:" + "y" * 500}, "item_id is longer than 500 characters"),
        ({"body": "  "}, "body must be a non-empty string"),
        ({"body": "x" * 20_001}, "body is longer than 20000 characters"),
        ({"body": "x", "call_seq": 99}, "call_seq names no call of this run"),
        ({"body": "the window slid", "item_id": " tool:read ", "call_seq": 2}, None),
    ],
)
def test_a_note_gets_the_same_answer_from_the_page_and_the_api(editor, run, fields, refused):
    form = {name: str(value) for name, value in fields.items()}
    from_page = page_message(editor, run, "add_note", form)
    page_notes = list(Note.objects.values_list("body", "item_id", "call__seq"))
    Note.objects.all().delete()
    from_api = api_message(editor, f"/api/v1/runs/{run.id}/notes", fields)
    assert from_page == from_api == refused
    assert list(Note.objects.values_list("body", "item_id", "call__seq")) == page_notes
    # Refused means nothing stored: the page no longer cuts a long item id to fit.
    assert bool(page_notes) == (refused is None)
    if refused is None:
        assert page_notes == [("the window slid", "tool:read", 2)]


def runs_on_page(client, run, query: str) -> list[str] | str:
    response = client.get(f"/projects/{run.project.slug}/runs/?{query}")
    if response.status_code == 400:
        return response.content.decode()
    assert response.status_code == 200
    return [row.key for row in response.context["runs"]]


def runs_in_api(client, query: str) -> list[str]:
    response = client.get(f"/api/v1/runs?{query}")
    assert response.status_code == 200, response.content
    return [row["key"] for row in response.json()["runs"]]


def test_until_excludes_its_instant_on_the_page_as_in_the_api(editor, run):
    started = run.started_at
    for until, expected in (
        (started, []),
        (started + timedelta(microseconds=1), [run.key]),
        (started - timedelta(seconds=1), []),
    ):
        query = f"until={quote(until.isoformat())}"
        assert runs_on_page(editor, run, query) == runs_in_api(editor, query) == expected, until


def test_a_date_alone_as_until_takes_that_whole_day_on_the_page(editor, run):
    day = run.started_at.date()
    assert runs_on_page(editor, run, f"since={day}&until={day}") == [run.key]
    assert runs_on_page(editor, run, f"until={day - timedelta(days=1)}") == []


def test_the_label_filter_ignores_case_on_the_page_as_in_the_api(editor, run):
    writes.add_label(run, None, name="Incident")
    for label in ("incident", "INCIDENT", "Incident"):
        query = f"label={label}"
        assert runs_on_page(editor, run, query) == runs_in_api(editor, query) == [run.key]


def test_a_form_number_is_an_int_only_when_it_is_ascii_digits():
    assert writes.form_int(" 12 ") == 12
    assert writes.form_int("²") == "²"
    assert writes.form_int("-1") == "-1"


def test_a_project_is_created_once_with_its_owner_as_admin(alice):
    project = writes.create_project("Payments on-call", owner=alice)
    assert (project.slug, project.name) == ("payments-on-call", "Payments on-call")
    assert Membership.objects.get(project=project, user=alice).role == Membership.Role.ADMIN
    for name, slug, status, message in (
        ("Payments on-call", None, 409, "a project called 'payments-on-call' already exists"),
        ("!!!", None, 400, "at least one letter or digit"),
        ("x", "no spaces", 400, "not a valid slug"),
    ):
        with pytest.raises(writes.Refused, match=message) as refused:
            writes.create_project(name, slug=slug)
        assert refused.value.status == status


def test_a_label_is_removed_whatever_its_case_and_with_a_slash_in_its_name(editor, run):
    for name, asked in (("Incident", "INCIDENT"), ("team/payments", quote("Team/Payments", safe=""))):
        writes.add_label(run, None, name=name)
        response = editor.delete(f"/api/v1/runs/{run.id}/labels/{asked}")
        assert response.status_code == 204, (name, response.content)
    assert list(run.labels.all()) == []
    assert editor.delete(f"/api/v1/runs/{run.id}/labels/team/payments").status_code == 404  # gone
    # The page's form removes one the same way.
    writes.add_label(run, None, name="Incident")
    assert page_message(editor, run, "remove_label", {"name": "INCIDENT"}) is None
    assert list(run.labels.all()) == []
