"""The review page (notes, labels, bookmarks, export, deletion) and the project settings page."""

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxview.models import Bookmark, Label, Note
from ingest.models import Membership, Project, Run
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
            messages=[user_message("<b>why?</b>")],
            attributes={"gen_ai.conversation.id": "r"},
        )
        send(request)
    return Run.objects.get()


def test_an_editor_adds_notes_labels_and_bookmarks(client, run, bob):
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    url = f"/runs/{run.id}/review"
    client.post(f"{url}/add_note", {"body": "<script>alert(1)</script> the window slid", "call_seq": "2"})
    client.post(f"{url}/add_label", {"name": "Incident", "link": "https://t.example/INC-1"})
    client.post(f"{url}/bookmark", {"call_seq": "1"})
    assert Note.objects.get().call.seq == 2
    assert list(Label.objects.values_list("name", flat=True)) == ["incident"]
    assert Bookmark.objects.get().call.seq == 1
    page = client.get(url).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; the window slid" in page and "<script>alert(1)" not in page
    assert "https://t.example/INC-1" in page
    response = client.post(f"{url}/add_label", {"name": "x", "link": "javascript:alert(1)"}, follow=True)
    assert "link must be an http(s) URL" in response.content.decode()
    assert Label.objects.count() == 1


def test_a_label_link_that_is_not_http_is_shown_as_text_not_as_a_link(client, run, alice):
    # The form refuses such a link, but an imported export may carry one.
    Label.objects.create(project=run.project, run=run, name="imported", link="javascript:alert(1)")
    client.force_login(alice)
    page = client.get(f"/runs/{run.id}/review").content.decode()
    assert "javascript:alert(1)" in page and 'href="javascript' not in page


def test_a_viewer_reads_but_cannot_write_and_a_stranger_gets_404(client, run, bob, django_user_model):
    Membership.objects.create(project=run.project, user=bob, role="viewer")
    client.force_login(bob)
    assert client.get(f"/runs/{run.id}/review").status_code == 200
    assert client.post(f"/runs/{run.id}/review/add_note", {"body": "x"}).status_code == 403
    client.force_login(factories.user("stranger"))
    assert client.get(f"/runs/{run.id}/review").status_code == 404


def test_an_admin_deletes_the_run_from_its_review_page(client, run, alice):
    client.force_login(alice)
    response = client.post(f"/runs/{run.id}/review/delete_run", {})
    assert response.status_code == 302
    assert not Run.objects.exists()


def test_settings_change_the_policy_and_members(client, run, alice, bob):
    client.force_login(alice)
    url = f"/projects/{run.project.slug}/settings"
    assert client.get(url).status_code == 200
    client.post(
        f"{url}/policy",
        {
            "retention_days": "7",
            "raw_retention_days": "1",
            "hash_only": "on",
            "patterns": "ticket TCK-[0-9]+\nemail [a-z]+@[a-z.]+",
        },
    )
    project = Project.objects.get(id=run.project_id)
    assert (project.retention_days, project.raw_retention_days, project.hash_only) == (7, 1, True)
    assert project.redaction_patterns == [["ticket", "TCK-[0-9]+"], ["email", "[a-z]+@[a-z.]+"]]
    response = client.post(
        f"{url}/policy",
        {"retention_days": "7", "raw_retention_days": "1", "patterns": "broken ([x"},
        follow=True,
    )
    assert "pattern broken" in response.content.decode()
    client.post(f"{url}/add_member", {"username": "bob", "role": "editor"})
    assert Membership.objects.get(project=project, user=bob).role == "editor"
    response = client.post(f"{url}/remove_member", {"username": "alice"}, follow=True)
    assert "a project keeps at least one admin" in response.content.decode()
    client.force_login(bob)
    assert client.post(f"{url}/add_member", {"username": "bob", "role": "admin"}).status_code == 403


def test_settings_prices_are_checked_as_the_prices_api_checks_them(client, run, alice):
    client.force_login(alice)
    url = f"/projects/{run.project.slug}/settings"
    for prices, message in (
        ('[{"model": "m1", "input": true, "output": 1}]', "prices[0].input must be a number"),
        ('[{"model": " ", "input": 1, "output": 1}]', "prices[0] needs a model name"),
        ("[{", "the prices are not valid JSON"),
    ):
        response = client.post(f"{url}/prices", {"prices": prices}, follow=True)
        assert message in response.content.decode(), prices
    assert Project.objects.get(id=run.project_id).prices == []
    client.post(f"{url}/prices", {"prices": '[{"model": " m1 ", "input": 2, "output": 8, "x": 1}]'})
    assert Project.objects.get(id=run.project_id).prices == [{"model": "m1", "input": 2, "output": 8}]


@pytest.mark.parametrize("seq", ["²", "99999999999999999999"])
def test_a_call_seq_that_is_no_call_number_is_refused_with_a_message(client, run, bob, seq):
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    url = f"/runs/{run.id}/review"
    bookmark = client.post(f"{url}/bookmark", {"call_seq": seq}, follow=True)
    assert "call_seq names no call of this run" in bookmark.content.decode()
    note = client.post(f"{url}/add_note", {"body": "x", "call_seq": seq}, follow=True)
    assert "call_seq names no call of this run" in note.content.decode()
    assert not Bookmark.objects.exists() and not Note.objects.exists()


@pytest.mark.parametrize("note_id", ["x", "²", "99999999999999999999"])
def test_deleting_a_note_id_that_is_no_number_says_there_is_no_such_note(client, run, bob, note_id):
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    response = client.post(f"/runs/{run.id}/review/delete_note", {"note_id": note_id}, follow=True)
    assert response.status_code == 200 and "no such note" in response.content.decode()


def test_each_write_of_the_pages_has_its_own_url(client, run, alice):
    client.force_login(alice)
    review, settings = f"/runs/{run.id}/review", f"/projects/{run.project.slug}/settings"
    assert client.post(f"{review}/add_label", {"name": "incident"}).status_code == 302
    assert list(run.labels.values_list("name", flat=True)) == ["incident"]
    assert client.post(f"{review}/rename_run", {"name": "x"}).status_code == 404
    assert client.post(f"{settings}/drop_tables").status_code == 404
    # The pages themselves only read; their forms post to the action's URL.
    assert client.post(review, {"action": "delete_run"}).status_code == 405
    assert client.get(f"{review}/delete_run").status_code == 405
    assert Run.objects.filter(id=run.id).exists()
    page = client.get(review).content.decode()
    assert f'action="{review}/add_note"' in page and f'action="{review}/delete_run"' in page
    assert f'action="{settings}/prices"' in client.get(settings).content.decode()


# --- Notes and the bookmark on a call page and an item page --------------------------------------

NOTES_CARD = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "notes"}


def test_a_note_is_added_edited_and_bookmarked_on_the_call_page_without_javascript(client, run, bob):
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    call = run.calls.get(seq=2)
    back = {"back": "call", "call_seq": "2"}
    response = client.post(f"/runs/{run.id}/review/add_note", {**back, "body": "<b>first</b> reading"})
    assert response.status_code == 302 and response.url == f"/calls/{call.id}/#notes"
    note = Note.objects.get()
    assert (note.call_id, note.item_id, note.author) == (call.id, "", bob)
    client.post(f"/runs/{run.id}/review/edit_note", {**back, "note_id": note.id, "body": "second reading"})
    client.post(f"/runs/{run.id}/review/bookmark", back)
    page = client.get(f"/calls/{call.id}/").content.decode()
    card = page[page.index('id="notes"') :]
    assert "second reading" in card and "History (1 earlier text)" in card
    assert "&lt;b&gt;first&lt;/b&gt; reading" in card and "<b>first</b>" not in page
    assert "until bob edited it at" in card and "★ Bookmarked" in card and "remove the bookmark" in card
    assert "✎ 1 note · ★ bookmarked" in page
    assert Bookmark.objects.get().call == call
    client.post(f"/runs/{run.id}/review/unbookmark", back)
    assert not Bookmark.objects.exists()


def test_the_call_page_notes_card_answers_htmx_with_itself(client, run, alice):
    client.force_login(alice)
    call = run.calls.get(seq=1)
    back = {"back": "call", "call_seq": "1"}
    response = client.post(f"/runs/{run.id}/review/add_note", {**back, "body": "look"}, **NOTES_CARD)
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith("<section") and 'id="notes"' in body and "<html" not in body
    assert "look" in body and 'hx-post="/runs/' in body
    # A refused write says why inside the card, with the write's status.
    empty = client.post(f"/runs/{run.id}/review/add_note", {**back, "body": "  "}, **NOTES_CARD)
    assert empty.status_code == 400 and "body must be a non-empty string" in empty.content.decode()
    assert Note.objects.filter(call=call).count() == 1


def test_a_note_on_an_item_is_written_and_shown_on_the_item_page(client, run, alice):
    client.force_login(alice)
    item_id = run.calls.get(seq=1).full_items()[0]["id"]
    back = {"back": "item", "item_id": item_id}
    response = client.post(f"/runs/{run.id}/review/add_note", {**back, "body": "this one"})
    assert response.status_code == 302 and response.url.endswith("#notes") and "/item?id=" in response.url
    assert Note.objects.get().item_id == item_id
    note = Note.objects.get()
    fragment = client.post(
        f"/runs/{run.id}/review/edit_note", {**back, "note_id": note.id, "body": "that one"}, **NOTES_CARD
    ).content.decode()
    assert "that one" in fragment and "History (1 earlier text)" in fragment and "this one" in fragment
    page = client.get(response.url.removesuffix("#notes")).content.decode()
    assert "that one" in page[page.index('id="notes"') :]


def test_a_viewer_reads_the_notes_card_but_gets_no_form_and_cannot_post(client, run, alice, bob):
    call = run.calls.get(seq=1)
    Note.objects.create(project=run.project, run=run, call=call, author=alice, body="read me")
    Membership.objects.create(project=run.project, user=bob, role="viewer")
    client.force_login(bob)
    page = client.get(f"/calls/{call.id}/").content.decode()
    card = page[page.index('id="notes"') :]
    assert "read me" in card and "you can read the notes, not write them" in card
    assert "<form" not in card and "Not bookmarked." in card
    back = {"back": "call", "call_seq": "1"}
    assert client.post(f"/runs/{run.id}/review/add_note", {**back, "body": "x"}).status_code == 403
    assert client.post(f"/runs/{run.id}/review/bookmark", back, **NOTES_CARD).status_code == 403


def test_an_editor_may_edit_only_their_own_notes(client, run, alice, bob):
    note = Note.objects.create(project=run.project, run=run, author=alice, body="alice's")
    Membership.objects.create(project=run.project, user=bob, role="editor")
    client.force_login(bob)
    assert "edit_note" not in client.get(f"/runs/{run.id}/review").content.decode()
    response = client.post(
        f"/runs/{run.id}/review/edit_note", {"note_id": note.id, "body": "bob's"}, follow=True
    )
    assert "only the note&#x27;s author or an admin may change it" in response.content.decode()
    note.refresh_from_db()
    assert note.body == "alice's" and not note.revisions.exists()
