import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ctxview.replay import run_calls
from ingest.models import Call, Run
from tests import factories

TRACE_ID = bytes(range(1, 17))


@pytest.fixture
def stored_trace(project):
    factories.processed(project, factories.trace_request(spans=2, trace_id=TRACE_ID))
    return TRACE_ID.hex()


def test_reads_a_trace_with_the_projects_key(client, key, stored_trace):
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    body = response.json()
    assert [span["span_id"] for span in body["spans"]] == ["0000000000000001", "0000000000000002"]
    assert body["spans"][0]["service"] == "agent"
    assert body["spans"][0]["attributes"]["gen_ai.usage.input_tokens"] == 100


def test_another_projects_key_gets_404(client, bob, stored_trace):
    _, other_key = factories.project_with_key("beta", owner=bob)
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert response.status_code == 404
    assert response.json() == {"error": "no such trace"}


def test_a_member_reads_with_a_session_and_a_stranger_gets_404(client, alice, bob, stored_trace):
    client.force_login(alice)
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 200
    client.force_login(bob)
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 404


def test_a_superuser_reads_every_project(client, stored_trace):
    client.force_login(factories.user("root", superuser=True))
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 200


def test_no_credentials_get_401(client, stored_trace):
    response = client.get(f"/api/v1/traces/{stored_trace}")
    assert response.status_code == 401
    assert response.json() == {"error": "send 'Authorization: Bearer <key>' or log in"}


def test_a_revoked_key_gets_401(client, project, key, stored_trace):
    project.keys.get().revoke()
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 401


def test_a_malformed_trace_id_gets_400(client, key):
    response = client.get("/api/v1/traces/xyz", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 400
    assert response.json() == {"error": "trace id must be 32 hex characters"}


# --- Runs and calls ------------------------------------------------------------------------------

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from tests.factories import chat_span, user_message  # noqa: E402


@pytest.fixture
def runs(project):
    """Three runs of two services, each with two calls (the second without content)."""
    for number in range(3):
        request = ExportTraceServiceRequest()
        trace = bytes([number + 1]) * 16
        for call in (1, 2):
            chat_span(
                request,
                trace_id=trace,
                number=number * 10 + call,
                start=1_700_000_000_000_000_000 + number * 10**12 + call,
                messages=[user_message(f"question {number}")] if call == 1 else None,
                attributes={
                    "gen_ai.conversation.id": f"run-{number}",
                    "gen_ai.usage.input_tokens": 100,
                    "gen_ai.usage.cache_read.input_tokens": 40,
                    "gen_ai.usage.cache_creation.input_tokens": 10,
                    "gen_ai.usage.output_tokens": 5,
                },
            )
        request.resource_spans[0].resource.attributes[0].value.string_value = (
            "svc-b" if number == 2 else "svc-a"
        )
        factories.processed(project, request)


def get(client, key, path, status=200):
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == status, response.content
    return response.json()


def test_runs_newest_first_with_totals_and_urls(client, key, runs):
    body = get(client, key, "/api/v1/runs")
    assert [run["key"] for run in body["runs"]] == ["run-2", "run-1", "run-0"]
    first = body["runs"][-1]
    assert (first["service"], first["calls"], first["turns"], first["models"]) == ("svc-a", 2, 1, ["m1"])
    assert first["usage"] == {
        "uncached": 100,
        "cache_write": 20,
        "cache_read": 80,
        "output": 10,
        "reasoning": None,
        "prompt_total": 200,
    }
    assert first["url"] == f"http://testserver/runs/{first['id']}/"
    assert body["next"] is None


def test_runs_paginate_with_next(client, key, runs):
    page = get(client, key, "/api/v1/runs?limit=2")
    assert [run["key"] for run in page["runs"]] == ["run-2", "run-1"]
    rest = get(client, key, page["next"].replace("http://testserver", ""))
    assert [run["key"] for run in rest["runs"]] == ["run-0"]
    assert rest["next"] is None


def test_runs_filter_by_service_and_time(client, key, runs):
    assert [run["key"] for run in get(client, key, "/api/v1/runs?service=svc-b")["runs"]] == ["run-2"]
    since = get(client, key, "/api/v1/runs")["runs"][1]["started_at"]
    filtered = get(client, key, f"/api/v1/runs?since={since.replace('+', '%2B')}")
    assert [run["key"] for run in filtered["runs"]] == ["run-2", "run-1"]


@pytest.mark.parametrize(
    "query, message",
    [
        ("limit=0", "limit must be between 1 and 500"),
        ("limit=x", "limit must be a whole number"),
        ("since=yesterday", "since must be an ISO 8601 date and time"),
        ("cursor=zzz", "cursor is not one"),
        ("cursor=", "cursor is not one"),  # the schema fuzz suite: an empty one was the first page
        ("until=", "until must be an ISO 8601 date and time"),
        ("limit=", "limit must be a whole number"),
        # Found by the fuzz suite: PostgreSQL refused the NUL and the API answered 500.
        ("service=a%00b", "service contains a NUL character"),
        ("project=%00", "project contains a NUL character"),
    ],
)
def test_runs_reject_bad_parameters(client, key, runs, query, message):
    assert message in get(client, key, f"/api/v1/runs?{query}", status=400)["error"]


def test_what_the_schema_allows_the_api_takes_and_what_it_forbids_the_api_refuses(client, key, runs):
    """The drift an attacker found, both ways; tests/fuzz/test_api_schema.py checks the rest."""
    schema = get(client, key, "/api/v1/openapi.json")["components"]["parameters"]
    run_id = get(client, key, "/api/v1/runs")["runs"][-1]["id"]
    call_id = get(client, key, f"/api/v1/runs/{run_id}/calls")["calls"][0]["id"]
    biggest_seq = schema["after_seq"]["schema"]["maximum"]
    assert get(client, key, f"/api/v1/runs/{run_id}/calls?after_seq={biggest_seq}")["calls"] == []
    get(client, key, f"/api/v1/runs/{run_id}/calls?after_seq={biggest_seq + 1}", status=400)
    # Any cursor of the documented shape is a place to continue from: here, after the end of time.
    assert get(client, key, "/api/v1/runs?cursor=999999999999999999_1")["runs"]
    assert get(client, key, "/api/v1/runs?cursor=0_1")["runs"] == []
    biggest_limit = schema["content_limit"]["schema"]["maximum"]
    get(client, key, f"/api/v1/calls/{call_id}?content_limit={biggest_limit}")
    message = get(client, key, f"/api/v1/calls/{call_id}?content_limit={biggest_limit + 1}", status=400)
    assert message["error"] == f"content_limit must be between 1 and {biggest_limit}"
    assert get(client, key, f"/api/v1/calls/{call_id}?content=yes", status=400)["error"] == (
        "content must be 0, 1 or true"
    )


def test_calls_of_a_run_in_seq_order(client, key, runs):
    run_id = get(client, key, "/api/v1/runs")["runs"][-1]["id"]
    body = get(client, key, f"/api/v1/runs/{run_id}/calls?limit=1")
    [call] = body["calls"]
    assert (call["seq"], call["turn"], call["model"], call["provider"]) == (1, 1, "m1", "anthropic")
    assert call["usage"] == {
        "uncached": 50,
        "cache_write": 10,
        "cache_read": 40,
        "output": 5,
        "reasoning": None,
        "prompt_total": 100,
    }
    assert call["content_captured"] is True
    assert [(item["kind"], item["bucket"], item["role"], item["position"]) for item in call["items"]] == [
        ("message", "conversation", "user", 0)
    ]
    assert call["tool_calls"] == [] and call["tool_definitions"] is None
    second = get(client, key, body["next"].replace("http://testserver", ""))["calls"][0]
    assert (second["seq"], second["content_captured"], second["items"]) == (2, False, [])
    assert "content was not captured" in second["notes"][-1]


def test_one_call_with_its_content_on_request(client, key, runs):
    run_id = get(client, key, "/api/v1/runs")["runs"][-1]["id"]
    call_id = get(client, key, f"/api/v1/runs/{run_id}/calls")["calls"][0]["id"]
    assert "content" not in get(client, key, f"/api/v1/calls/{call_id}")["items"][0]
    item = get(client, key, f"/api/v1/calls/{call_id}?content=1&content_limit=20")["items"][0]
    assert item["content"] == '{"role":"user","part'
    assert item["content_truncated"] is True


def test_another_projects_key_cannot_read_runs_or_calls(client, bob, runs):
    _, other_key = factories.project_with_key("beta", owner=bob)
    assert get(client, other_key, "/api/v1/runs")["runs"] == []
    run = Run.objects.first()
    call = run.calls.first()
    assert get(client, other_key, f"/api/v1/runs/{run.id}", status=404) == {"error": "no such run"}
    assert get(client, other_key, f"/api/v1/runs/{run.id}/calls", status=404) == {"error": "no such run"}
    assert get(client, other_key, f"/api/v1/calls/{call.id}", status=404) == {"error": "no such call"}


def test_the_openapi_description_lists_every_endpoint(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert set(paths) == {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/calls",
        "/api/v1/calls/{call_id}",
        "/api/v1/traces/{trace_id}",
        "/api/v1/runs/{run_id}/findings",
        "/api/v1/runs/{run_id}/items/{item_id}",
        "/api/v1/runs/{run_id}/replay",
        "/api/v1/runs/{run_id}/probes",
        "/api/v1/runs/{run_id}/export",
        "/api/v1/projects/{slug}/import",
        "/api/v1/schema/run-export",
        "/api/v1/projects/{slug}/monitors",
        "/api/v1/projects/{slug}/monitors/{monitor_id}",
        "/api/v1/projects/{slug}/monitors/{monitor_id}/test",
        "/api/v1/projects/{slug}/alerts",
        "/api/v1/runs/{run_id}/notes",
        "/api/v1/notes/{note_id}",
        "/api/v1/runs/{run_id}/labels",
        "/api/v1/runs/{run_id}/labels/{name}",
        "/api/v1/calls/{call_id}/bookmark",
        "/api/v1/runs/{run_id}/calls.csv",
        "/api/v1/projects/{slug}/policy",
        "/api/v1/projects/{slug}/prices",
        "/api/v1/openapi.json",
    }


@pytest.mark.parametrize("path", ["/api/v1/nothing", "/api/v2/runs", "/api/", "/api/v1/runs/1/calls/x"])
def test_an_unknown_api_path_is_a_json_404(client, key, path):
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert "openapi.json" in response.json()["error"]


def test_a_write_to_an_unknown_api_path_is_the_same_json_404_not_a_csrf_page(alice):
    client = Client(enforce_csrf_checks=True)  # as a browser session is checked
    client.force_login(alice)
    for method in ("post", "delete", "put"):
        response = getattr(client, method)("/api/v1/runs/null/probes")
        assert (response.status_code, response["Content-Type"]) == (404, "application/json"), method


def test_an_items_lifecycle_reads_the_runs_item_lists_in_queries_that_do_not_grow_with_its_calls(
    client, key, project
):
    # Each call's items were read as the loop reached it, and the chunk's item lists loaded with the
    # first only held that call: a query per call.
    counts = {}
    for calls in (5, 40):
        factories.processed(project, factories.conversation_request(calls, f"conversation-{calls}"))
        run = Run.objects.get(key=f"conversation-{calls}")
        item = Call.objects.get(run=run, seq=1).items[0]["id"]
        with CaptureQueriesContext(connection) as queries:
            body = get(client, key, f"/api/v1/runs/{run.id}/items/{item}")
        assert body["first_seq"] == 1
        counts[calls] = len(queries)
    assert counts[40] == counts[5], counts


def test_a_replays_calls_are_read_in_queries_that_do_not_grow_with_the_run(project):
    counts = {}
    for calls in (5, 40):
        factories.processed(project, factories.conversation_request(calls, f"replayed-{calls}"))
        run = Run.objects.get(key=f"replayed-{calls}")
        with CaptureQueriesContext(connection) as queries:
            assert len(run_calls(run)) == calls
        counts[calls] = len(queries)
    assert counts[40] == counts[5], counts
