"""Import as a trust boundary: a run export is checked whole before anything is written.

The broken documents are those an outside attack sent (issue 40): each was stored and then broke the run's
pages, or answered 500, or was taken as it was. Each is now refused with a 400 naming the path of what is
wrong, and nothing is stored in any project. A document written by the first ctxview that exported
(tests/data/exports/run-export-v1-b026b87.json, commit b026b87, 2026-11-30) still imports, every page of
its run answering 200."""

import copy
import json
from pathlib import Path

import pytest

from ingest import export_format
from ingest.models import Call, Run
from tests import factories
from tests.ctxview.import_pages import broken_pages, stored_rows

FIRST_EXPORT = Path(__file__).resolve().parents[1] / "data" / "exports" / "run-export-v1-b026b87.json"


@pytest.fixture
def document() -> dict:
    return json.loads(FIRST_EXPORT.read_text())


@pytest.fixture
def target(alice):
    return factories.project_with_key("gamma", owner=alice)


def post(client, key: str, body) -> tuple[int, dict]:
    response = client.post(
        "/api/v1/projects/gamma/import",
        body if isinstance(body, str) else json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    return response.status_code, response.json()


def nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = {"x": value}
    return value


def first_item_hash(doc: dict) -> str:
    return doc["calls"][0]["items"][0]["hash"]


# (what is broken, how, the path and words the refusal must hold)
BROKEN = [
    ("items a string", lambda d: d["calls"][0].update(items="abc"), "calls[0].items: must be a list"),
    ("items an object", lambda d: d["calls"][0].update(items={"a": 1}), "calls[0].items: must be a list"),
    ("items numbers", lambda d: d["calls"][1].update(items=[1, 2]), "calls[1].items[0]: must be an object"),
    (
        "an item without a hash",
        lambda d: d["calls"][0]["items"][1].pop("hash"),
        "calls[0].items[1].hash: missing",
    ),
    ("excluded a string", lambda d: d["calls"][2].update(excluded="x"), "calls[2].excluded: must be a list"),
    (
        "tool_calls a number",
        lambda d: d["calls"][0].update(tool_calls=3),
        "calls[0].tool_calls: must be a list",
    ),
    (
        "usage_raw nested 60 deep",
        lambda d: d["calls"][0].update(usage_raw={"x": nested(59)}),
        "calls[0].usage_raw.x: must be a string, a number, true, false, null or a list of them",
    ),
    ("usage a list", lambda d: d["calls"][0].update(usage=[1]), "calls[0].usage: must be an object"),
    (
        "1.5e300 tokens",
        lambda d: d["calls"][0]["usage"].update(output=1.5e300),
        "calls[0].usage.output: must be at most 9,007,199,254,740,991",
    ),
    (
        "2**70 tokens",
        lambda d: d["calls"][0]["usage"].update(uncached=2**70),
        "calls[0].usage.uncached: must be at most 9,007,199,254,740,991",
    ),
    (
        "start_ns of 10**30",
        lambda d: d["calls"][0].update(start_ns=10**30),
        "calls[0].start_ns: must be at most 4,102,444,800,000,000,000",
    ),
    (
        "one span twice",
        lambda d: d["calls"][3].update(span_id=d["calls"][1]["span_id"], trace_id=d["calls"][1]["trace_id"]),
        "calls[3]: the span (trace_id, span_id) of calls[1] again",
    ),
    (
        "content_captured a string",
        lambda d: d["calls"][0].update(content_captured="yes"),
        "calls[0].content_captured: must be boolean",
    ),
    (
        "negative tokens",
        lambda d: d["calls"][0]["usage"].update(output=-5),
        "calls[0].usage.output: must be at least 0",
    ),
    (
        "negative item tokens",
        lambda d: d["calls"][0]["items"][0].update(tokens=-1),
        "calls[0].items[0].tokens: must be at least 0",
    ),
    (
        "a content whose hash is not its text's",
        lambda d: d["contents"][first_item_hash(d)].update(text="something else"),
        ": the hash is not that of its text",
    ),
    (
        "a note body an object",
        lambda d: d["notes"][0].update(body={"a": 1}),
        "notes[0].body: must be a string",
    ),
    ("a seq as text", lambda d: d["calls"][1].update(seq="2"), "calls[1].seq: must be an integer"),
    (
        "a revision without edited_at",
        lambda d: d["notes"][0]["revisions"][0].pop("edited_at"),
        "notes[0].revisions[0].edited_at: missing",
    ),
    (
        "an item's content missing",
        lambda d: d["contents"].pop(first_item_hash(d)),
        "calls[0].items[0].hash: no content with this hash in contents",
    ),
    (
        "a gap in seq",
        lambda d: d["calls"].pop(2),
        "calls: must be numbered 1..5 without gaps (no call has seq 3)",
    ),
    ("a note on no call", lambda d: d["notes"][0].update(call_seq=99), "notes[0].call_seq: no call 99"),
    (
        "a bookmark of no call",
        lambda d: d.update(bookmarks=[4, 40]),
        "bookmarks[1]: no call 40 in the document",
    ),
    (
        "an unknown item field",
        lambda d: d["calls"][0]["items"][0].update(evil=1),
        "calls[0].items[0].evil: not a",
    ),
    (
        "a key that reads as a number",  # the validator gives it as the number: not a list's entry
        lambda d: d["contents"].update({"0": {"text": "x", "evil": 1}}),
        'contents["0"].evil: not a field of this format',
    ),
    ("a bad time", lambda d: d["notes"][0].update(created_at="yesterday"), "notes[0].created_at: not an ISO"),
    ("a javascript: link", lambda d: d["labels"][0].update(link="javascript:alert(1)"), "http(s) URL"),
    (
        "version 2",
        lambda d: d.update(version=2),
        "version: 2 is not a version this ctxview reads (it reads 1)",
    ),
    (
        "a trace id too long",
        lambda d: d["calls"][0].update(trace_id="f" * 33),
        "calls[0].trace_id: longer than 32",
    ),
    (
        "a bucket unknown",
        lambda d: d["calls"][0]["items"][0].update(bucket="b"),
        "calls[0].items[0].bucket: must",
    ),
]


@pytest.mark.parametrize("what, breaks, said", BROKEN, ids=[case[0] for case in BROKEN])
def test_a_broken_document_is_refused_by_path_and_nothing_is_stored(
    client, target, document, what, breaks, said
):
    before = stored_rows()
    breaks(document)
    status, body = post(client, target[1], document)
    assert status == 400, (what, body)
    assert said in body["error"], (what, body)
    assert "Error(" not in body["error"] and "Traceback" not in body["error"]
    assert stored_rows() == before


def test_the_first_export_ctxview_wrote_still_imports_and_every_page_answers(
    client, alice, target, document, django_capture_on_commit_callbacks
):
    assert export_format.problem(document) is None
    with django_capture_on_commit_callbacks(execute=True):
        status, body = post(client, target[1], document)
    assert status == 201, body
    run = Run.objects.get(id=body["run"])
    assert (run.key, run.call_count, run.analysed_seq) == ("demo-order-service-timeout", 6, 6)
    client.force_login(alice)
    assert broken_pages(client, run) == []
    again = client.get(f"/api/v1/runs/{run.id}/export").json()
    assert export_format.problem(again) is None
    keep = ("trace_id", "span_id", "seq", "items", "usage", "excluded", "tool_calls")
    assert [{k: c[k] for k in keep} for c in again["calls"]] == [
        {k: c[k] for k in keep} for c in document["calls"]
    ]
    assert again["contents"] == document["contents"]
    assert [note["body"].split("\n\n")[0] for note in again["notes"]] == [document["notes"][0]["body"]]
    assert again["bookmarks"] == document["bookmarks"] and again["labels"][0]["name"] == "incident"


def test_a_count_written_as_two_point_zero_is_the_integer_two(client, target, document):
    text = json.dumps(document).replace('"output": 220', '"output": 220.0', 1)
    assert '"output": 220.0' in text
    status, body = post(client, target[1], text)
    assert status == 201, body
    assert Run.objects.get(id=body["run"]).calls.get(seq=1).output == 220


def test_a_call_without_its_manifest_source_imports_as_none_and_exports_valid(client, target, document):
    # Found by the import fuzz: an optional field left out was stored as "" and the export then failed
    # the schema (manifest_source is one of explicit, derived, none).
    del document["calls"][1]["manifest_source"]
    status, body = post(client, target[1], document)
    assert status == 201, body
    assert Run.objects.get(id=body["run"]).calls.get(seq=2).manifest_source == "none"
    export = client.get(f"/api/v1/runs/{body['run']}/export", HTTP_AUTHORIZATION=f"Bearer {target[1]}")
    assert export_format.problem(export.json()) is None


def test_a_hash_only_export_has_no_contents_and_imports(client, target, document):
    hash_only = copy.deepcopy(document)
    hash_only["contents"] = {}
    status, body = post(client, target[1], hash_only)
    assert status == 201, body


def test_the_schema_is_published_and_is_the_one_imports_check(client):
    response = client.get("/api/v1/schema/run-export")
    assert response.status_code == 200
    assert response.json() == export_format.schema()
    assert response.json()["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    api = client.get("/api/v1/openapi.json").json()["paths"]
    assert (
        "/api/v1/schema/run-export"
        in api["/api/v1/projects/{slug}/import"]["post"]["requestBody"]["content"]["application/json"][
            "schema"
        ]["description"]
    )


@pytest.mark.parametrize("model", [Call, Run], ids=["Call", "Run"])
def test_every_field_is_exported_or_said_not_to_be_and_the_schema_knows_each_exported_one(model):
    fields = {field.name for field in model._meta.concrete_fields}
    exported = set(model.EXPORT_FIELDS) | (set(Run.USAGE_FIELDS) if model is Call else set())
    if model is Run:
        exported |= set(Run.USAGE_FIELDS)  # a run's totals are made again from its calls' usage
    assert fields - exported - set(model.NOT_EXPORTED) == set(), (
        "add the new field to EXPORT_FIELDS or NOT_EXPORTED"
    )
    # ``items`` is read and written through the item list (ingest.itemlists), not a column.
    assert (set(model.EXPORT_FIELDS) | set(model.NOT_EXPORTED)) - fields == (
        {"items"} if model is Call else set()
    )
    described = (
        export_format.schema()["$defs"]["call"]
        if model is Call
        else export_format.schema()["properties"]["run"]
    )
    assert set(model.EXPORT_FIELDS) - set(described["properties"]) == set()


def test_an_imported_run_keeps_its_agents(client, target, document):
    lead, researcher = document["calls"][0], document["calls"][1]
    lead.update(agent_name="lead", agent_invocation="a" * 16, agent_entry="root")
    researcher.update(
        agent_name="researcher",
        agent_invocation="b" * 16,
        parent_invocation="a" * 16,
        agent_entry="agent_as_tool",
        agent_depth=1,
        root_invocation="a" * 16,
    )
    status, body = post(client, target[1], document)
    assert status == 201, body
    imported = Run.objects.get(id=body["run"]).calls.get(seq=2)
    assert (imported.agent_invocation, imported.parent_invocation, imported.agent_depth) == (
        "b" * 16,
        "a" * 16,
        1,
    )
