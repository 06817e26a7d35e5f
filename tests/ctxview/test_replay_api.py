"""The replay and probes API on the demo runs, and probes on a run sent by a plain OTel exporter."""

import json
import time

import pytest
from django.test import Client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ctxview.demo.incident import PROBE_TEXTS
from ctxview.models import Probe
from ctxview.replay import compile_probe, regex_hits
from ingest.models import Membership, Run
from tests import factories
from tests.ctxview import ui_fixtures

inspect = ui_fixtures.inspect
stranger_client = ui_fixtures.stranger_client
viewer_client = ui_fixtures.viewer_client

DEMO_POLICIES = "recorded,full,sliding_window:12,user_verbatim:4"


def _replay(client, run, query: str = f"policies={DEMO_POLICIES}", **headers):
    return client.get(f"/api/v1/runs/{run.id}/replay?{query}", **headers)


def _policies(body: dict) -> dict:
    return {entry["policy"]: entry for entry in body["policies"]}


def _probe(entry: dict, name: str) -> dict:
    return next(probe for probe in entry["probes"] if probe["probe"] == name)


def test_the_recorded_replay_bills_what_the_run_reported(viewer_client, inspect):
    run = inspect.incident
    body = _replay(viewer_client, run).json()
    recorded = _policies(body)["recorded"]
    assert [entry["policy"] for entry in body["policies"]] == DEMO_POLICIES.split(",")
    assert recorded["calls"] == run.call_count
    assert recorded["billed_input"] == run.prompt_total
    # The cache figures are ctxview's model's, as in the run's own analysis (not the provider's).
    analyses = list(run.calls.values_list("analysis", flat=True))
    assert recorded["cache_read"] == sum(analysis["cache"]["expected_read"] for analysis in analyses)
    assert recorded["cache_breaks"] == sum(1 for analysis in analyses if analysis["cache"]["broke"])
    assert recorded["output"] == run.output
    assert body["at_turn"] == body["last_turn"] == run.turn_count
    assert body["content"] == "all"


def test_the_incident_replay_shows_what_the_article_measured(viewer_client, inspect):
    for text in PROBE_TEXTS:
        assert _post(viewer_client, inspect.incident, {"kind": "text", "value": text}).status_code == 201
    body = _replay(viewer_client, inspect.incident).json()
    policies = _policies(body)
    full, sliding, verbatim = policies["full"], policies["sliding_window:12"], policies["user_verbatim:4"]
    for name in ("fact:affected-shard", "pay-shard-7", "employee 4417"):
        assert _probe(full, name)["how"] == "verbatim", name
        assert _probe(verbatim, name)["present"] is True, name
    assert _probe(sliding, "pay-shard-7")["present"] is False
    assert _probe(sliding, "pay-shard-7")["left_at_call"] is not None
    assert _probe(sliding, "employee 4417")["present"] is True  # only because the agent repeated it
    assert _probe(sliding, "rule:ticket-owner")["present"] is False
    assert sliding["billed_input"] < 0.5 * full["billed_input"]
    assert 0.35 < verbatim["billed_input"] / full["billed_input"] < 0.65
    assert sliding["cache_breaks"] > full["cache_breaks"]
    assert body["cheapest_keeping_all"] == "user_verbatim:4"
    # The recording's own window is the last 12 messages: its replay and sliding_window:12 agree.
    figures = [key for key in sliding if key not in ("policy", "probes")]
    assert [sliding[key] for key in figures] == [policies["recorded"][key] for key in figures]
    assert [(probe["how"], probe["left_at_call"]) for probe in sliding["probes"]] == [
        (probe["how"], probe["left_at_call"]) for probe in policies["recorded"]["probes"]
    ]


def test_per_call_rows_come_only_when_asked(viewer_client, inspect):
    body = _replay(viewer_client, inspect.incident, "policies=sliding_window:12&calls=1&at_turn=20").json()
    [entry] = body["policies"]
    assert len(entry["per_call"]) == entry["calls"]
    assert sum(row["window"] for row in entry["per_call"]) == entry["billed_input"]
    assert (
        body["at_turn"] == 20
        and "per_call" not in _replay(viewer_client, inspect.incident).json()["policies"][0]
    )


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("policies=window:3", "policies: unknown policy 'window'"),
        ("policies=sliding_window:0", "policies: sliding_window: N must be a whole number from 1"),
        ("policies=", None),
        ("at_turn=0", "at_turn must be between 1 and 2147483647"),
        ("at_turn=x", "at_turn must be a whole number"),
    ],
)
def test_bad_parameters_are_a_400_with_the_reason(viewer_client, inspect, query, message):
    response = _replay(viewer_client, inspect.incident, query)
    if message is None:  # an empty list means the default policies
        assert response.status_code == 200
    else:
        assert response.status_code == 400
        assert response.json()["error"].startswith(message)


def test_a_stranger_gets_404_a_key_reads_and_no_credentials_get_401(stranger_client, inspect):
    assert _replay(stranger_client, inspect.incident).status_code == 404
    assert _replay(Client(), inspect.incident).status_code == 401
    keyed = _replay(Client(), inspect.incident, HTTP_AUTHORIZATION=f"Bearer {inspect.key}")
    assert keyed.status_code == 200


# --- Probes ---------------------------------------------------------------------------------------


def _post(client, run, data) -> object:
    return client.post(f"/api/v1/runs/{run.id}/probes", json.dumps(data), content_type="application/json")


def test_the_runs_facts_and_rules_are_standing_probes(viewer_client, inspect):
    probes = viewer_client.get(f"/api/v1/runs/{inspect.incident.id}/probes").json()["probes"]
    standing = [(probe["kind"], probe["value"]) for probe in probes if probe["standing"]]
    assert ("item", "fact:affected-shard") in standing and ("item", "rule:ticket-owner") in standing


def test_an_editor_adds_follows_and_removes_a_text_probe(viewer_client, inspect):
    run = inspect.timeout
    response = _post(viewer_client, run, {"kind": "text", "value": "  public API  "})
    assert response.status_code == 201
    added = response.json()
    assert (added["kind"], added["value"], added["standing"]) == ("text", "public API", False)
    assert _post(viewer_client, run, {"kind": "text", "value": "public API"}).status_code == 409

    body = _replay(viewer_client, run, "policies=full").json()
    assert _probe(body["policies"][0], "public API")["how"] == "verbatim"

    deleted = viewer_client.delete(f"/api/v1/runs/{run.id}/probes?id={added['id']}")
    assert deleted.status_code == 204
    assert not Probe.objects.filter(run=run).exists()
    assert viewer_client.delete(f"/api/v1/runs/{run.id}/probes?id={added['id']}").status_code == 404
    for junk in ("²", "x", ""):
        refused = viewer_client.delete(f"/api/v1/runs/{run.id}/probes?id={junk}")
        assert refused.status_code == 400 and "id must be the number of a probe" in refused.json()["error"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "word", "value": "x"}, "kind must be one of item, text, regex"),
        ({"kind": "text", "value": ""}, "value must be a non-empty string"),
        ({"kind": "text", "value": 7}, "value must be a non-empty string"),
        ({"kind": "text", "value": "x" * 501}, "value is longer than 500 characters"),
        ({"kind": "text", "value": "a\x00b"}, "value: contains a NUL character"),
        ({"kind": "regex", "value": "(unclosed"}, "value is not a valid regular expression"),
    ],
)
def test_a_bad_probe_is_a_400_with_the_reason(viewer_client, inspect, data, message):
    response = _post(viewer_client, inspect.incident, data)
    assert response.status_code == 400
    assert response.json()["error"].startswith(message)


def test_a_viewer_reads_probes_but_cannot_add_them(inspect, db):
    reader = factories.user("reader")
    Membership.objects.create(project=inspect.project, user=reader, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(reader)
    assert client.get(f"/api/v1/runs/{inspect.incident.id}/probes").status_code == 200
    assert _post(client, inspect.incident, {"kind": "text", "value": "x"}).status_code == 403


def test_a_regular_expression_probe_matches_case_insensitively(viewer_client, inspect):
    run = inspect.incident
    assert _post(viewer_client, run, {"kind": "regex", "value": r"pay-shard-\d+"}).status_code == 201
    body = _replay(viewer_client, run, "policies=full,sliding_window:12").json()
    policies = _policies(body)
    assert _probe(policies["full"], r"pay-shard-\d+")["how"] == "verbatim"
    assert _probe(policies["sliding_window:12"], r"pay-shard-\d+")["present"] is False


def test_a_pattern_that_runs_out_of_time_is_unknown_not_a_stuck_request():
    contents = {"a": "a" * 50_000 + "!", "b": "pay-shard-7"}
    later = time.monotonic() + 60
    assert regex_hits(compile_probe(r"PAY-shard-\d"), contents, later) == {"b"}
    assert regex_hits(compile_probe(r"(?:a|aa)+(?:a|aa)+(?:a|aa)+b"), contents, later) == frozenset()
    # Past the deadline before the first window: unknown.
    assert regex_hits(compile_probe(r"pay"), contents, time.monotonic() - 1) is None


# --- A run from a plain OpenTelemetry instrumentation (no SDK) -------------------------------------


def _send_chat_spans(live_server, key, service: str, with_content: bool) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=10
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.replay")
    history: list[dict] = []
    turns = ["Tickets go under employee 4417.", "The broken shard is пей-шард-7 ✓", "Anything else?"]
    agent = tracer.start_span("invoke_agent oncall", attributes={"gen_ai.operation.name": "invoke_agent"})
    context = trace.set_span_in_context(agent)
    for number, text in enumerate(turns, start=1):
        history.append({"role": "user", "parts": [{"type": "text", "content": text}]})
        with tracer.start_as_current_span("chat claude-sonnet-4-5", context=context) as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", "anthropic")
            span.set_attribute("gen_ai.request.model", "claude-sonnet-4-5")
            span.set_attribute("gen_ai.usage.input_tokens", 40 * number)
            span.set_attribute("gen_ai.usage.output_tokens", 20)
            if with_content:
                span.set_attribute("gen_ai.input.messages", json.dumps(history, ensure_ascii=False))
        history.append({"role": "assistant", "parts": [{"type": "text", "content": f"Noted ({number})."}]})
    agent.end()
    provider.shutdown()


@pytest.mark.django_db(transaction=True)
def test_probes_work_on_a_run_from_a_plain_otel_instrumentation(live_server, alice, project, key):
    _send_chat_spans(live_server, key, "plain-agent", with_content=True)
    run = Run.objects.get(project=project)
    client = Client()
    client.force_login(alice)
    for value in ("EMPLOYEE 4417", "пей-шард-7"):
        assert _post(client, run, {"kind": "text", "value": value}).status_code == 201
    body = _replay(client, run, "policies=recorded,sliding_window:1").json()
    assert body["content"] == "all"
    policies = _policies(body)
    assert [_probe(policies["recorded"], name)["how"] for name in ("EMPLOYEE 4417", "пей-шард-7")] == [
        "verbatim",
        "verbatim",
    ]
    assert _probe(policies["sliding_window:1"], "EMPLOYEE 4417")["present"] is False


@pytest.mark.django_db(transaction=True)
def test_a_run_without_captured_content_says_so_instead_of_guessing(live_server, alice, project, key):
    _send_chat_spans(live_server, key, "quiet-agent", with_content=False)
    run = Run.objects.get(project=project)
    client = Client()
    client.force_login(alice)
    assert _post(client, run, {"kind": "text", "value": "4417"}).status_code == 201
    body = _replay(client, run, "policies=recorded").json()
    assert body["content"] == "none"
    assert _probe(body["policies"][0], "4417") | {} == {
        **_probe(body["policies"][0], "4417"),
        "present": None,
        "how": "unknown",
    }


def test_a_replay_past_the_item_budget_is_a_400_that_says_so(viewer_client, inspect, monkeypatch):
    from ctxview import replay

    monkeypatch.setattr(replay, "MAX_REPLAYED_ITEMS", 600)
    response = _replay(viewer_client, inspect.incident, "policies=full,pin_end,elide:4")
    assert response.status_code == 400
    assert response.json()["error"].startswith(
        "replaying this run under these policies rebuilds more than 600"
    )
    # Full history rebuilds only what each call added.
    assert _replay(viewer_client, inspect.incident, "policies=full").status_code == 200


def test_a_turn_past_the_last_is_read_at_the_last_and_the_answer_says_so(viewer_client, inspect):
    response = _replay(viewer_client, inspect.incident, "policies=recorded&at_turn=41")
    assert response.status_code == 200
    assert response.json()["at_turn"] == 40
