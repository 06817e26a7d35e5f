"""The API as a product (issue 36): /api/v1/openapi.json describes every route under /api/v1/ of the URLconf
with exactly the methods its view takes, and /api/v1/docs renders it (Swagger UI from our static files)."""

import json
import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import ctxview
from ctxview.models import Label, Monitor, Note
from ctxview.security import CONTENT_SECURITY_POLICY
from ingest.models import Call
from tests import factories
from tests.browser.conftest import browser_page, chromium, login, screenshot  # noqa: F401  (fixtures too)

DOCUMENT = json.loads((Path(ctxview.__file__).parent / "openapi.json").read_text())
PATHS = DOCUMENT["paths"]
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
# Under api/v1/ but not part of the API: the page for people.
NOT_API = {"/api/v1/docs"}
# Public, and read by any method (test_authz_matrix's ANY_METHOD): described as the GET it is meant for.
ANY_METHOD = {"/api/v1/openapi.json"}
BUNDLE = "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
STYLES = "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css"


def api_routes(resolver=None, prefix: str = ""):
    """The routes under api/v1/, as OpenAPI paths: ``<int:run_id>`` becomes ``{run_id}``."""
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            yield from api_routes(entry, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            route = prefix + str(entry.pattern)
            if route.startswith("api/v1/"):
                yield "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def operations():
    for path, entries in PATHS.items():
        for method, operation in entries.items():
            yield path, method, operation


# --- The description against the URLconf --------------------------------------------------------


def test_every_api_route_is_described_and_every_described_path_is_a_route():
    routes = set(api_routes())
    assert NOT_API <= routes
    assert routes - NOT_API == set(PATHS)


@pytest.fixture
def objects(send_as, alice, project, key):
    """Alpha's objects, one of each kind a path names (alice is its admin)."""
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=bytes(range(1, 17)),
        number=1,
        messages=[factories.user_message("what is in the window?")],
        attributes={"gen_ai.conversation.id": "docs-run"},
    )
    send_as(key, request)
    call = Call.objects.get(project=project)
    note = Note.objects.create(project=project, run=call.run, author=alice, body="a note")
    Label.objects.create(project=project, run=call.run, name="incident")
    monitor = Monitor.objects.create(
        project=project, name="any window", kind="window_size", params={"above_tokens": 10}, channels=[]
    )
    return {
        "run_id": call.run_id,
        "call_id": call.id,
        "item_id": call.items[0]["id"],
        "trace_id": call.trace_id,
        "note_id": note.id,
        "name": "incident",
        "slug": project.slug,
        "monitor_id": monitor.id,
    }


def url_of(path: str, objects: dict) -> str:
    return re.sub(r"\{(\w+)\}", lambda found: str(objects[found.group(1)]), path)


def example_of(operation: dict | None):
    """The example body of an operation, or None."""
    content = (operation or {}).get("requestBody", {}).get("content", {})
    return content.get("application/json", {}).get("example")


@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_route_takes_the_methods_described_and_no_other(client, alice, objects, path):
    """As the project's admin, with a real object in every path: a described method is answered with a
    status the description lists (a success for the example body, when there is one; else ``{}``), any
    other method is a 405. Each request is rolled back."""
    client.force_login(alice)
    url = url_of(path, objects)
    described = {method.upper() for method in PATHS[path]}
    assert described <= set(METHODS)
    wrong = []
    for method in METHODS:
        if path in ANY_METHOD and method not in described:
            continue
        example = example_of(PATHS[path].get(method.lower()))
        with transaction.atomic():
            data = json.dumps(example if example is not None else {})
            response = client.generic(method, url, data, content_type="application/json")
            transaction.set_rollback(True)
        if method in described:
            listed = PATHS[path][method.lower()]["responses"]
            if response.status_code == 405 or str(response.status_code) not in listed:
                wrong.append(f"{method} {url}: {response.status_code}, described: {', '.join(listed)}")
            elif example is not None and response.status_code >= 300:
                wrong.append(f"{method} {url}: {response.status_code} for the example: {response.content}")
        elif response.status_code != 405:
            wrong.append(f"{method} {url}: {response.status_code}, but the description has no {method}")
    assert not wrong, wrong


def test_every_operation_says_what_it_is_and_the_errors_its_kind_of_view_gives():
    ids = [operation["operationId"] for _, _, operation in operations()]
    assert len(ids) == len(set(ids))
    tags = {tag["name"] for tag in DOCUMENT["tags"]}
    for path, method, operation in operations():
        where = f"{method.upper()} {path}"
        assert operation["summary"] and set(operation["tags"]) <= tags, where
        responses = set(operation["responses"])
        if operation.get("security") == []:  # public: nothing to be refused but a wrong token
            assert responses == {"200", "401"}, where
            continue
        # Credentials are checked first, and any parameter may hold text that cannot be stored.
        assert {"400", "401", "404"} <= responses, where
        if method != "get":  # a write needs a role (a key reads; a read-only token reads)
            assert "403" in responses, where
        if "requestBody" in operation:  # a JSON body: bounded, and checked
            assert "413" in responses, where
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")):
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, f"{where} {status}"


def test_every_example_body_is_valid_by_its_own_schema():
    from jsonschema import Draft202012Validator

    examples = 0
    for _, _, operation in operations():
        if (example := example_of(operation)) is not None:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            Draft202012Validator({**schema, "components": DOCUMENT["components"]}).validate(example)
            examples += 1
    assert examples >= 8


def test_every_reference_resolves():
    text = json.dumps(DOCUMENT)
    for reference in set(re.findall(r'"\$ref": "#/([^"]+)"', text)):
        node = DOCUMENT
        for part in reference.split("/"):
            node = node[part]


# --- The page -----------------------------------------------------------------------------------


def test_the_reference_is_public_as_the_document_is_and_served_from_our_static_files(client):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<script src="/static/{BUNDLE}"></script>' in html
    assert f'<link rel="stylesheet" href="/static/{STYLES}">' in html
    assert 'data-spec-url="/api/v1/openapi.json"' in html
    assert not re.search(r'(?:src|href)="(?:https?:)?//', html)  # nothing from another origin
    for name in (BUNDLE, STYLES):
        assert finders.find(name), name
        assert client.get(f"/static/{name}").status_code == 200
    assert client.get("/api/v1/openapi.json").status_code == 200  # what it renders, public too


def test_the_reference_keeps_the_strict_policy_of_every_page(client):
    response = client.get("/api/v1/docs")
    assert "<script>" not in response.content.decode() and "nonce" not in response.content.decode()
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert client.get("/static/ctxview/api_docs.js").status_code == 200


def test_the_reference_only_reads(client):
    assert client.post("/api/v1/docs").status_code == 405


def test_the_header_links_to_the_reference(client, alice):
    client.force_login(alice)
    assert 'href="/api/v1/docs"' in client.get("/tokens/").content.decode()


def test_the_browser_renders_every_operation_and_tries_a_write_as_the_session(
    live_server,
    browser_page,  # noqa: F811
    alice,
    objects,
):
    page, base = browser_page, live_server.url
    elsewhere = []
    page.on("request", lambda request: request.url.startswith(base) or elsewhere.append(request.url))
    login(page, base, "alice", "pw-alice")
    page.click("header >> text=API reference")
    page.wait_for_selector(".opblock")
    assert page.locator(".opblock").count() == sum(1 for _ in operations())
    assert page.locator(".opblock-summary-path", has_text="/api/v1/runs/{run_id}/notes").count() == 2
    # "Try it out" on a write, logged in and with no token: the page sends the session's CSRF token.
    add_note = page.locator(".opblock").filter(has_text="Add a note to the run")
    add_note.locator(".opblock-summary-description").click()
    add_note.locator(".try-out__btn").click()
    add_note.locator("input[placeholder=run_id]").fill(str(objects["run_id"]))
    add_note.locator(".execute").click()
    assert add_note.locator(".live-responses-table .response .response-col_status").inner_text() == "201"
    assert Note.objects.filter(
        author=alice, body=example_of(PATHS["/api/v1/runs/{run_id}/notes"]["post"])["body"]
    )
    assert page.console.errors == [] and elsewhere == []
    screenshot(page, "api-reference", docs=False)
