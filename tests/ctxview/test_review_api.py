"""Notes, labels, bookmarks, export/import, CSV, deletion, data policy and search, with the role matrix."""

import csv
import io
import json
from io import StringIO
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxview import queries
from ctxview.demo import timeout
from ctxview.models import Bookmark, Label, Note, NoteRevision
from ctxview.review_api import MAX_IMPORT_BYTES
from ctxview_sdk import configure, flush, shutdown
from ingest import export_format
from ingest.models import Call, Content, Finding, Membership, Run
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import TRACE, send  # noqa: F401  (the fixture)

USAGE = {
    "gen_ai.conversation.id": "review",
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 10,
}


@pytest.fixture
def run(send, project):  # noqa: F811
    for number in (1, 2, 3):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=TRACE,
            number=number,
            messages=[user_message(f"question {n}") for n in range(1, number + 1)],
            attributes={
                "gen_ai.conversation.id": "review",
                "gen_ai.usage.input_tokens": 100 * number,
                "gen_ai.usage.cache_read.input_tokens": 0,
                "gen_ai.usage.cache_creation.input_tokens": 0,
                "gen_ai.usage.output_tokens": 10,
            },
        )
        send(request)
    return Run.objects.get(project=project)


@pytest.fixture
def people(project, alice, bob):
    """alice: admin (the project's owner); bob: editor; carol: viewer; dave: no role here."""
    Membership.objects.create(project=project, user=bob, role="editor")
    carol, dave = factories.user("carol"), factories.user("dave")
    Membership.objects.create(project=project, user=carol, role="viewer")
    return {"admin": alice, "editor": bob, "viewer": carol, "stranger": dave}


def as_user(client, user):
    client.force_login(user)
    return client


WRITES = [
    # (name, method, path, body, minimum role)
    ("note", "post", "/api/v1/runs/{run}/notes", {"body": "looks like the sliding window"}, "editor"),
    (
        "label",
        "post",
        "/api/v1/runs/{run}/labels",
        {"name": "incident", "link": "https://t.example/1"},
        "editor",
    ),
    ("bookmark", "put", "/api/v1/calls/{call}/bookmark", None, "editor"),
    ("policy", "patch", "/api/v1/projects/alpha/policy", {"retention_days": 7}, "admin"),
    ("delete", "delete", "/api/v1/runs/{run}", None, "admin"),
]
RANK = {"viewer": 0, "editor": 1, "admin": 2}


@pytest.mark.parametrize("role", ["admin", "editor", "viewer", "stranger"])
@pytest.mark.parametrize("name, method, path, body, needed", WRITES, ids=[w[0] for w in WRITES])
def test_the_role_matrix(client, run, people, role, name, method, path, body, needed):
    url = path.format(run=run.id, call=run.calls.first().id)
    response = getattr(as_user(client, people[role]), method)(
        url, json.dumps(body) if body is not None else "", content_type="application/json"
    )
    if role == "stranger":
        assert response.status_code == 404, response.content
    elif RANK[role] >= RANK[needed]:
        assert response.status_code in (200, 201, 204), response.content
    else:
        assert response.status_code == 403
        assert f"needs the {needed} role" in response.json()["error"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs/{run}/notes",
        "/api/v1/runs/{run}/export",
        "/api/v1/runs/{run}/calls.csv",
        "/api/v1/runs/{run}/labels",
    ],
)
def test_every_member_reads_and_a_stranger_gets_404(client, run, people, path):
    for role, status in (("viewer", 200), ("editor", 200), ("admin", 200), ("stranger", 404)):
        assert as_user(client, people[role]).get(path.format(run=run.id)).status_code == status, role


def test_an_ingest_key_reads_but_cannot_write(client, run, key):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    assert client.get(f"/api/v1/runs/{run.id}/notes", **auth).status_code == 200
    response = client.post(
        f"/api/v1/runs/{run.id}/notes", '{"body": "x"}', content_type="application/json", **auth
    )
    assert response.status_code == 403
    assert "an ingest key can only read" in response.json()["error"]


def test_session_writes_need_the_csrf_token(run, people):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(people["admin"])
    response = strict.post(f"/api/v1/runs/{run.id}/notes", '{"body": "x"}', content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]


def test_notes_keep_their_edit_history(client, run, people):
    editor = as_user(client, people["editor"])
    created = editor.post(
        f"/api/v1/runs/{run.id}/notes",
        json.dumps({"body": "first", "call_seq": 2}),
        content_type="application/json",
    ).json()
    assert created["call_seq"] == 2 and created["author"] == "bob"
    edited = editor.patch(
        f"/api/v1/notes/{created['id']}", '{"body": "second"}', content_type="application/json"
    ).json()
    assert edited["body"] == "second"
    assert [revision["body"] for revision in edited["revisions"]] == ["first"]
    # Another editor may not change bob's note; an admin may.
    other = factories.user("erin")
    Membership.objects.create(project=run.project, user=other, role="editor")
    assert as_user(client, other).delete(f"/api/v1/notes/{created['id']}").status_code == 403
    assert as_user(client, people["admin"]).delete(f"/api/v1/notes/{created['id']}").status_code == 204


def test_listing_notes_takes_the_same_queries_however_many_notes(client, run, people):
    def add_note(body: str) -> None:
        note = Note.objects.create(project=run.project, run=run, author=people["editor"], body=body)
        NoteRevision.objects.create(note=note, body=f"{body} (before)", editor=people["admin"])

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(f"/api/v1/runs/{run.id}/notes").status_code == 200
        return len(captured)

    as_user(client, people["viewer"])
    add_note("one")
    one = queries()
    for number in range(4):
        add_note(f"more {number}")
    assert queries() == one
    assert client.get(f"/api/v1/runs/{run.id}/notes").json()["notes"][-1]["revisions"] == [
        {
            "body": "more 3 (before)",
            "editor": "alice",
            "edited_at": NoteRevision.objects.last().edited_at.isoformat(),
        }
    ]


@pytest.mark.parametrize(
    "body, message",
    [
        ({"body": ""}, "body must be a non-empty string"),
        ({"body": "x", "call_seq": 99}, "call_seq names no call"),
        ("[1]", "must be a JSON object"),
        ("{", "not valid JSON"),
    ],
)
def test_bad_note_bodies_are_400_with_a_message(client, run, people, body, message):
    data = body if isinstance(body, str) else json.dumps(body)
    response = as_user(client, people["editor"]).post(
        f"/api/v1/runs/{run.id}/notes", data, content_type="application/json"
    )
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_a_junk_content_length_is_a_400_not_a_500(client, run, people):
    response = as_user(client, people["editor"]).post(
        f"/api/v1/runs/{run.id}/notes", "{}", content_type="application/json", CONTENT_LENGTH="ten"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "Content-Length is not a number"


def test_policy_rejects_bad_values(client, run, people):
    admin = as_user(client, people["admin"])
    for body, message in (
        ({"retention_days": 0}, "from 1 to 3650"),
        ({"hash_only": "yes"}, "true or false"),
        ({"redaction_patterns": [["bad", "([x"]]}, "pattern bad"),
    ):
        response = admin.patch(
            "/api/v1/projects/alpha/policy", json.dumps(body), content_type="application/json"
        )
        assert response.status_code == 400 and message in response.json()["error"], body


def test_an_export_lists_bookmarks_by_seq_and_skips_a_call_not_numbered_yet(client, run, people):
    for seq in (3, 2):
        Bookmark.objects.create(project=run.project, call=run.calls.get(seq=seq))
    assert as_user(client, people["viewer"]).get(f"/api/v1/runs/{run.id}/export").json()["bookmarks"] == [
        2,
        3,
    ]
    run.calls.filter(seq=3).update(seq=None)
    assert client.get(f"/api/v1/runs/{run.id}/export").json()["bookmarks"] == [2]


def test_export_and_import_round_trip_gives_the_same_calls_and_findings(
    live_server, client, project, key, people
):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    source = Run.objects.get(project=project, key="demo-migration-200-files")
    as_user(client, people["editor"]).post(
        f"/api/v1/runs/{source.id}/labels", '{"name": "Incident"}', content_type="application/json"
    )
    client.post(
        f"/api/v1/runs/{source.id}/notes",
        '{"body": "the date breaks the cache", "call_seq": 30}',
        content_type="application/json",
    )
    client.put(f"/api/v1/calls/{source.calls.get(seq=45).id}/bookmark")
    document = client.get(f"/api/v1/runs/{source.id}/export").json()
    assert (document["format"], document["version"], len(document["calls"])) == ("ctxview.run-export", 1, 80)

    target_project, target_key = factories.project_with_key("gamma", owner=people["admin"])
    response = client.post(
        "/api/v1/projects/gamma/import",
        json.dumps(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {target_key}",
    )
    assert response.status_code == 201, response.content
    target = Run.objects.get(id=response.json()["run"])

    def calls_of(run):
        body = client.get(
            f"/api/v1/runs/{run.id}/calls?limit=500",
            HTTP_AUTHORIZATION=f"Bearer {key if run.project == project else target_key}",
        ).json()
        return [{k: v for k, v in call.items() if k not in ("id", "url", "run")} for call in body["calls"]]

    imported, original = calls_of(target), calls_of(source)
    for mine, theirs in zip(imported, original, strict=True):
        assert {k: v for k, v in mine.items() if v != theirs[k]} == {}, mine["seq"]

    def findings(run):
        return sorted(
            Finding.objects.filter(run=run).values_list("call_seq", "type", "item_id", "cause"),
            key=str,
        )

    assert findings(target) == findings(source)
    assert target.accounting == source.accounting
    assert set(Content.objects.filter(project=target_project).values_list("hash", flat=True)) == set(
        Content.objects.filter(
            project=project, hash__in={i["hash"] for c in source.calls.all() for i in c.items}
        ).values_list("hash", flat=True)
    )
    assert list(Label.objects.filter(run=target).values_list("name", flat=True)) == ["incident"]
    assert Note.objects.get(run=target).call.seq == 30
    assert Bookmark.objects.get(call__run=target).call.seq == 45
    # Importing the same run again would duplicate its calls: refused, nothing written.
    again = client.post(
        "/api/v1/projects/gamma/import",
        json.dumps(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {target_key}",
    )
    assert again.status_code == 409
    assert "already in project gamma" in again.json()["error"]
    assert Run.objects.filter(project=target_project).count() == 1


@pytest.mark.parametrize(
    "document, message",
    [
        ({"format": "other"}, "format: must be 'ctxview.run-export'"),
        ({"format": "ctxview.run-export", "version": 9}, "version: 9 is not a version this ctxview reads"),
        (
            {
                "format": "ctxview.run-export",
                "version": 1,
                "run": {"key": "k"},
                "calls": [
                    {"seq": 2, "start_ns": 1, "trace_id": "t", "span_id": "s", "end_ns": 1, "items": []}
                ],
            },
            "calls: must be numbered 1..1 without gaps (no call has seq 1)",
        ),
        (
            {
                "format": "ctxview.run-export",
                "version": 1,
                "run": {"key": "k"},
                "calls": [
                    {"seq": 1, "start_ns": 1, "trace_id": "t", "span_id": "s", "end_ns": 1, "items": []}
                ],
                "labels": [{"name": "incident", "link": "javascript:alert(1)"}],
            },
            "labels[0].link: must be an http(s) URL",
        ),
    ],
)
def test_import_rejects_bad_documents_and_stores_nothing(client, project, key, document, message):
    response = client.post(
        f"/api/v1/projects/{project.slug}/import",
        json.dumps(document),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert not Run.objects.exists()


def test_calls_csv(client, run, people):
    run.calls.filter(seq=1).update(response_model="claude-sonnet-4-5-20250929")  # priced; m1 is not
    text = as_user(client, people["viewer"]).get(f"/api/v1/runs/{run.id}/calls.csv").content.decode()
    lines = text.strip().splitlines()
    assert lines[0].startswith("seq,turn,started_at,model,provider,uncached")
    assert len(lines) == 4 and lines[1].startswith("1,1,")
    rows = list(csv.DictReader(io.StringIO(text)))
    calls = {call.seq: call for call in run.calls.all()}
    for row in rows:  # the cost the call page shows: at the project's prices, or why not
        call = calls[int(row["seq"])]
        price = queries.prices_of(run.project)(call.model)
        if price is None:
            assert (row["cost_usd"], row["cost_basis"]) == ("", f"no price for {call.model}")
        else:
            expected = (call.uncached * price.input + call.output * price.output) / 1e6  # nothing cached
            assert float(row["cost_usd"]) == pytest.approx(expected)
            assert row["cost_basis"] == f"{call.model} at the project's prices"
    assert [row["cost_usd"] != "" for row in rows] == [True, False, False]


def test_an_admin_deletes_a_run_and_everything_under_it(client, run, people):
    hashes = {item["hash"] for call in run.calls.all() for item in call.items}
    response = as_user(client, people["admin"]).delete(f"/api/v1/runs/{run.id}")
    assert response.json()["deleted"]["calls"] == 3
    assert not Run.objects.exists() and not Call.objects.exists()
    assert not Content.objects.filter(hash__in=hashes).exists()


def test_search_by_item_source_version_hash_finding_label_and_model(
    live_server, client, project, key, people
):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}

    def keys(query):
        return sorted(run["key"] for run in client.get(f"/api/v1/runs?{query}", **auth).json()["runs"])

    assert keys("source=src/api/billing.ts&version=v1") == ["demo-migration-200-files"]
    assert keys("item=fact:affected-shard") == ["demo-incident-turn-40"]
    fact = next(
        item
        for call in Run.objects.get(key="demo-incident-turn-40").calls.all()
        for item in call.items
        if item["id"] == "fact:affected-shard"
    )
    assert keys(f"hash={fact['hash']}") == ["demo-incident-turn-40"]
    assert keys("finding=lost_in_middle") == ["demo-order-service-timeout"]
    assert keys("source=no/such/file") == []
    run = Run.objects.get(key="demo-incident-turn-40")
    as_user(client, people["editor"]).post(
        f"/api/v1/runs/{run.id}/labels", '{"name": "incident"}', content_type="application/json"
    )
    assert keys("label=incident") == ["demo-incident-turn-40"]
    assert len(keys("model=claude-sonnet-4-5")) == 4  # every demo story but the hostile run


def test_an_export_and_an_sdk_manifest_validate_against_their_published_schemas(
    live_server, client, project, key
):
    schemas = Path(__file__).resolve().parents[2] / "schemas"
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    runs = Run.objects.filter(project=project)
    assert runs.count() >= 7  # the stories and the recorded CLI sessions (Claude Code, Codex, Gemini)
    for run in runs:
        document = client.get(f"/api/v1/runs/{run.id}/export", HTTP_AUTHORIZATION=f"Bearer {key}").json()
        # What an import checks (ingest.export_format), and the published file by another validator.
        assert export_format.problem(document) is None, run.key
        jsonschema.validate(document, json.loads((schemas / "run-export-v1.schema.json").read_text()))
    # The manifests of a demo story as the SDK emits them.
    memory = InMemorySpanExporter()
    configure(_exporter=memory, send_content=True)
    timeout.record()
    assert flush(timeout=10)
    shutdown(timeout=5)
    manifest_schema = json.loads((schemas / "manifest-v1.schema.json").read_text())
    for sdk_span in memory.get_finished_spans():
        jsonschema.validate(json.loads(sdk_span.attributes["ctxview.manifest"]), manifest_schema)


def test_an_admin_edits_prices_and_every_run_is_costed_again(
    client, run, people, django_capture_on_commit_callbacks
):
    run.refresh_from_db()
    before = run.accounting["cost_usd"]["with_cache"]
    prices = client.get("/api/v1/projects/alpha/prices", HTTP_AUTHORIZATION="").status_code
    assert prices == 401
    admin = as_user(client, people["admin"])
    table = admin.get("/api/v1/projects/alpha/prices").json()["prices"]
    assert any(row["model"].startswith("claude-sonnet-4") and row["source"]["input"] for row in table)
    body = {"prices": [{"model": "m1", "input": 10, "output": 50, "cache_read": 1, "cache_write_5m": 12.5}]}
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.put(
            "/api/v1/projects/alpha/prices", json.dumps(body), content_type="application/json"
        )
    assert response.status_code == 200, response.content
    edited = next(row for row in response.json()["prices"] if row["model"] == "m1")
    assert (edited["input"], edited["source"]["input"]) == (10.0, "edited by a user")
    run.refresh_from_db()
    assert before is None  # "m1" had no price before: the cost was unknown, not 0
    # 600 input tokens at $10 and 30 output tokens at $50 per million.
    assert run.accounting["cost_usd"]["with_cache"] == pytest.approx(0.0075)
    assert run.analysed_seq == run.call_count
    bad = admin.put(
        "/api/v1/projects/alpha/prices",
        '{"prices": [{"model": "m1", "input": -1, "output": 1}]}',
        content_type="application/json",
    )
    assert bad.status_code == 400 and "prices[0].input" in bad.json()["error"]
    # An optional rate sent as null is a rate not given (it was stored as null, and every later read of
    # the prices, the settings page and the analysis answered 500).
    null_rate = {"prices": [{"model": "m1", "input": 10, "output": 50, "cache_read": None}]}
    with django_capture_on_commit_callbacks(execute=True):
        response = admin.put(
            "/api/v1/projects/alpha/prices", json.dumps(null_rate), content_type="application/json"
        )
    assert response.status_code == 200, response.content
    assert next(row for row in response.json()["prices"] if row["model"] == "m1")["cache_read"] == 10.0
    assert admin.get("/api/v1/projects/alpha/prices").status_code == 200
    assert admin.get("/projects/alpha/settings").status_code == 200
    editor = as_user(client, people["editor"])
    assert (
        editor.put(
            "/api/v1/projects/alpha/prices", json.dumps(body), content_type="application/json"
        ).status_code
        == 403
    )


def test_an_export_over_django_s_2_5_mb_form_limit_imports(send, client, project, key, people):  # noqa: F811
    # Distinct content per call (stored once per hash): a document far over DATA_UPLOAD_MAX_MEMORY_SIZE.
    for number in range(1, 13):
        request = ExportTraceServiceRequest()
        text = " ".join(f"line {number}.{line} of the file" for line in range(40_000))
        factories.chat_span(
            request, trace_id=TRACE, number=number, messages=[user_message(text)], attributes=USAGE
        )
        send(request)
    source = Run.objects.get(project=project)
    body = client.get(f"/api/v1/runs/{source.id}/export", HTTP_AUTHORIZATION=f"Bearer {key}").content
    assert len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    factories.project_with_key("gamma", owner=people["admin"])
    response = as_user(client, people["admin"]).post(
        "/api/v1/projects/gamma/import", body, content_type="application/json"
    )
    assert response.status_code == 201, response.content[:300]
    assert Run.objects.get(id=response.json()["run"]).call_count == 12


def test_an_import_over_its_limit_is_refused_with_a_json_message(client, project, key):
    response = client.post(
        f"/api/v1/projects/{project.slug}/import",
        b" " * (MAX_IMPORT_BYTES + 1),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 413
    assert response.json() == {"error": f"the body is larger than {MAX_IMPORT_BYTES} bytes"}
    assert not Run.objects.exists()
