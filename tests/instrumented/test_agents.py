"""Issue 14: sessions and agent invocations, from the real multi-agent frameworks (openai-agents with a
handoff and with an agent as a tool, pydantic-ai delegation with and without a genuine cache break)
against the local fake provider, through the live server and the read API; and the same recordings
replayed through the receiver in other arrival orders (agent spans before, after and between their
calls), which must give exactly the same sessions."""

import json
import random

import pytest

from ctxcore.analysis import price_for
from ctxcore.analysis.accounting import call_cost
from ctxcore.vocabulary import Usage
from ingest.models import Run
from tests import factories
from tests.ctxview.test_views_html import problems
from tests.instrumented.expected import USAGE_FIELDS
from tests.instrumented.expected_agents import EXPECTED, expected_usage, invocation_of
from tests.instrumented.scenarios import FIXTURES, replay_scenario
from tests.instrumented.test_instrumented import require_packages

AGENT_SCENARIOS = [name for name, outcome in EXPECTED.items() if outcome.sessions[0].invocations]

BREAK_TYPES = ("cache_invalidated", "invisible_invalidator")


def api(client, key, path):
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.content
    return response.json()


def read(client, key) -> dict:
    """Everything the read API says about the project's runs: list, details, calls, findings."""
    listed = api(client, key, "/api/v1/runs")["runs"]
    runs = {}
    for run in listed:
        detail = api(client, key, f"/api/v1/runs/{run['id']}")
        calls = api(client, key, f"/api/v1/runs/{run['id']}/calls")["calls"]
        findings = api(client, key, f"/api/v1/runs/{run['id']}/findings")["findings"]
        runs[run["id"]] = {"listed": run, "detail": detail, "calls": calls, "findings": findings}
    return runs


def post_traces(client, capture, key: str, body: bytes) -> None:
    """POST OTLP/JSON traces with ``key``, running what the receiver enqueues on commit (``capture``:
    pytest-django's django_capture_on_commit_callbacks)."""
    with capture(execute=True):
        response = client.post(
            "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
        )
    assert response.status_code == 200, response.content


def by_span(runs: dict) -> dict[str, dict]:
    return {call["span_id"]: call for run in runs.values() for call in run["calls"]}


def expected_cost(calls: list[dict], usages: list[dict]) -> float | None:
    total = 0.0
    for call, usage in zip(calls, usages, strict=True):
        cost = call_cost(_Priced(Usage.from_dict(usage), call["usage_reported"]), price_for(call["model"]))
        if cost is None:
            return None
        total += cost[0]
    return total


class _Priced:
    def __init__(self, usage: Usage, usage_raw: dict) -> None:
        self.usage, self.usage_raw = usage, usage_raw


def check_sessions(name: str, described: list[dict], runs: dict) -> None:
    """Runs, calls, turns, usage, agents and invocations as EXPECTED[name] says."""
    outcome = EXPECTED[name]
    calls = by_span(runs)
    assert len(calls) == len(described)  # every call once
    by_index = [calls[call["span"]["span_id"]] for call in described]
    assert len(runs) == len(outcome.sessions)
    for session in outcome.sessions:
        run_id = by_index[session.calls[0]]["run"]
        run = runs[run_id]
        assert [by_index[index]["run"] for index in session.calls] == [run_id] * len(session.calls)
        assert [by_index[index]["seq"] for index in session.calls] == list(range(1, len(session.calls) + 1))
        for number, turn in enumerate(session.turns, 1):
            assert [by_index[index]["turn"] for index in turn] == [number] * len(turn)
        for view in (run["listed"], run["detail"]):
            assert (view["calls"], view["turns"]) == (len(session.calls), len(session.turns))
            assert view["agent"] == session.agent
            assert view["parent_run"] is None
        assert run["listed"]["agents"] == run["detail"]["agents"]

        # Each expected invocation is one id the API gives; its calls, agent, parent and entry.
        ids: dict[str, str] = {}
        for invocation in session.invocations:
            found = {by_index[index]["agent_invocation"] for index in invocation.calls}
            assert len(found) == 1 and None not in found, invocation.id
            ids[invocation.id] = found.pop()
            assert {by_index[index]["agent"] for index in invocation.calls} == {invocation.agent}
        assert len(set(ids.values())) == len(ids)
        stated = {entry["id"]: entry for entry in run["detail"]["invocations"]}
        assert set(stated) == set(ids.values())
        for invocation in session.invocations:
            entry = stated[ids[invocation.id]]
            assert entry["agent"] == invocation.agent
            assert entry["entered"] == invocation.entered
            assert entry["parent"] == (ids[invocation.parent] if invocation.parent else None)
            assert entry["seqs"] == [by_index[index]["seq"] for index in invocation.calls]
            assert entry["depth"] == (invocation.entered in ("agent_as_tool", "delegation", "subagent"))

        # Per agent: calls, exact usage sums, and the cost of exactly those calls.
        agents = {agent["name"]: agent for agent in run["detail"]["agents"]}
        names = {invocation.agent for invocation in session.invocations}
        assert set(agents) == names
        for agent_name in names:
            indexes = [index for index in session.calls if invocation_of(name, index)[1].agent == agent_name]
            usages = [expected_usage(name, described[index]) for index in indexes]
            agent = agents[agent_name]
            assert agent["calls"] == len(indexes)
            for figure in USAGE_FIELDS:
                values = [usage[figure] for usage in usages]
                assert agent["usage"][figure] == (sum(values) if None not in values else None), figure
            cost = expected_cost([by_index[index] for index in indexes], usages)
            assert agent["cost_usd"] == (None if cost is None else pytest.approx(cost, abs=1e-6))

    for call, expected in zip(by_index, described, strict=True):
        assert call["usage"] == expected_usage(name, expected), expected["index"]


def check_packets(client, key, runs: dict) -> None:
    """A child's packet is what its first call started from: its messages and their tokens."""
    for run in runs.values():
        first = {call["seq"]: call for call in run["calls"]}
        for invocation in run["detail"]["invocations"]:
            if invocation["entered"] == "root":
                assert invocation["packet"] is None
                continue
            call = api(client, key, f"/api/v1/calls/{first[invocation['seqs'][0]]['id']}")
            handed = [item for item in call["items"] if item["kind"] in ("message", "tool_result")]
            assert invocation["packet"] == {
                "messages": len(handed),
                "tokens": sum(item["tokens"] for item in handed),
            }
            assert invocation["packet"]["messages"] >= 1


def check_breaks(name: str, described: list[dict], runs: dict) -> None:
    """Exactly the genuine cache breaks, as calls and as findings (none where none happened)."""
    calls = by_span(runs)
    by_index = [calls[call["span"]["span_id"]] for call in described]
    broke = {index for index, call in enumerate(by_index) if call["cache"]["broke"]}
    assert broke == set(EXPECTED[name].cache_breaks)
    found = {
        (run_id, finding["call_seq"])
        for run_id, run in runs.items()
        for finding in run["findings"]
        if finding["type"] in BREAK_TYPES and finding["cause"] != "below_minimum"
    }
    assert found == {
        (by_index[index]["run"], by_index[index]["seq"]) for index in EXPECTED[name].cache_breaks
    }


@pytest.mark.parametrize("name", AGENT_SCENARIOS)
def test_sessions_agents_and_invocations_of_the_real_frameworks(
    live_server, client, project, key, scenario_folder, name
):
    require_packages(name)
    result = replay_scenario(name, live_server.url, key, scenario_folder)
    assert result["problems"] == []
    runs = read(client, key)
    check_sessions(name, result["calls"], runs)
    check_packets(client, key, runs)


@pytest.mark.parametrize("name", AGENT_SCENARIOS)
def test_exactly_the_genuine_cache_breaks_of_the_real_frameworks(
    live_server, client, project, key, scenario_folder, name
):
    require_packages(name)
    result = replay_scenario(name, live_server.url, key, scenario_folder)
    assert result["problems"] == []
    check_breaks(name, result["calls"], read(client, key))


# --- Arrival order ------------------------------------------------------------------------------


def fixture_batches(name: str, order: str) -> tuple[list[dict], list[bytes]]:
    """The recording's spans as OTLP/JSON requests in a given arrival order: ``recorded`` (as the
    exporter sent them), ``reversed`` (one span per request, parents first), ``shuffled`` (one span per
    request, a fixed random order), ``pairs`` (two spans per request, reversed), ``agents-last`` (the
    spans that name an agent one per request after everything else, so they relink calls stored long
    before)."""
    document = json.loads((FIXTURES / f"{name}.json").read_text())
    traces = document["traces"]
    if order == "recorded":
        return document["description"]["calls"], [json.dumps(traces).encode()]
    spans = []
    for resource in traces["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                spans.append((resource, scope, span))
    if order == "shuffled":
        random.Random(14).shuffle(spans)
    elif order == "agents-last":  # everything else first, then each span naming an agent alone
        spans.sort(key=lambda entry: names_an_agent(entry[2]))
    else:
        spans.reverse()
    named = sum(names_an_agent(span) for _, _, span in spans)
    size = {"pairs": 2, "agents-last": len(spans) - named}.get(order, 1)
    requests = []
    for start, end in chunks(len(spans), size, order == "agents-last"):
        chunk = spans[start:end]
        requests.append(
            json.dumps(
                {
                    "resourceSpans": [
                        {
                            **{k: v for k, v in resource.items() if k != "scopeSpans"},
                            "scopeSpans": [
                                {**{k: v for k, v in scope.items() if k != "spans"}, "spans": [span]}
                            ],
                        }
                        for resource, scope, span in chunk
                    ]
                }
            ).encode()
        )
    return document["description"]["calls"], requests


@pytest.mark.parametrize("name", AGENT_SCENARIOS)
def test_exactly_the_genuine_cache_breaks_of_the_recordings(
    client, alice, django_capture_on_commit_callbacks, name
):
    """The checked-in recordings through the receiver, the store and the read API (no subprocess)."""
    _project, key = factories.project_with_key("recorded", owner=alice)
    described, requests = fixture_batches(name, "recorded")
    for body in requests:
        post_traces(client, django_capture_on_commit_callbacks, key, body)
    runs = read(client, key)
    check_sessions(name, described, runs)
    check_breaks(name, described, runs)


def test_one_user_message_handed_off_between_unlinked_top_level_agents_is_one_turn(
    client, alice, django_capture_on_commit_callbacks
):
    """Issue 33: the openai-agents handoff recording with the handoff's link (``graph.node.parent_id``)
    taken out, as frameworks that mark their agents otherwise send it: two top-level agents, one user
    message. The switch of agent is no new turn (it was: 2 turns); the cache is still per agent. Both agents
    run in one ``Agent workflow`` span, which serves one request: the second is handed the work by the
    first even without the link."""
    document = json.loads((FIXTURES / "openai-agents-handoff.json").read_text())
    for resource in document["traces"]["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [
                    entry for entry in span["attributes"] if entry["key"] != "graph.node.parent_id"
                ]
    _project, key = factories.project_with_key("unlinked", owner=alice)
    post_traces(client, django_capture_on_commit_callbacks, key, json.dumps(document["traces"]).encode())
    runs = read(client, key)
    assert len(runs) == 1
    (run,) = runs.values()
    calls = sorted(run["calls"], key=lambda call: call["seq"])
    assert [call["agent"] for call in calls] == ["triage_agent"] * 2 + ["billing_agent"] * 2
    entered = sorted(run["detail"]["invocations"], key=lambda entry: entry["seqs"])
    assert [(entry["agent"], entry["entered"]) for entry in entered] == [
        ("triage_agent", "root"),
        ("billing_agent", "handoff"),
    ]
    assert [call["turn"] for call in calls] == [1, 1, 1, 1]
    assert (run["detail"]["calls"], run["detail"]["turns"]) == (4, 1)
    assert not any(call["cache"]["broke"] for call in calls)


def test_a_span_that_only_prepares_a_request_is_no_call(client, alice, django_capture_on_commit_callbacks):
    """Issue 33: LlamaIndex's FunctionAgent (OpenInference) emits an LLM-kind span that prepares each
    request (``OpenAI._prepare_chat_with_tools``: no messages, no usage, no response) before the request's
    own span. Only the requests are calls: 3, not 6, and no break between a preparation and its request."""
    document = json.loads((FIXTURES / "openinference-llama-index-agent.json").read_text())
    described = document["description"]["calls"]
    _project, key = factories.project_with_key("llama", owner=alice)
    post_traces(client, django_capture_on_commit_callbacks, key, json.dumps(document["traces"]).encode())
    runs = read(client, key)
    calls = sorted(
        (call for run in runs.values() for call in run["calls"]), key=lambda call: call["started_at"]
    )
    assert [call["span_id"] for call in calls] == [call["span"]["span_id"] for call in described]
    assert [call["name"] for call in calls] == ["OpenAI.astream_chat"] * 3
    assert not any(call["cache"]["broke"] for call in calls)
    findings = [finding for run in runs.values() for finding in run["findings"]]
    assert [
        finding
        for finding in findings
        if finding["type"] in BREAK_TYPES and finding["cause"] != "below_minimum"
    ] == []


def check_panel(client, user, runs: dict) -> None:
    """The run overview's Agents panel: well-formed, each agent, each boundary with its packet."""
    client.force_login(user)
    for run_id, run in runs.items():
        for child in Run.objects.filter(parent_run_id=run_id):  # a delegated run: a link, no calls
            assert child.call_count == 0 and child.started_at is None
            page = client.get(f"/runs/{child.id}/").content.decode()
            assert f'A child conversation of <a href="/runs/{run_id}/">run {run_id}</a>' in page
        response = client.get(f"/runs/{run_id}/panels/agents")
        assert response.status_code == 200
        html = response.content.decode()
        assert problems(html) == []
        for agent in run["detail"]["agents"]:
            assert f"<td>{agent['name']}</td>" in html
        for invocation in run["detail"]["invocations"]:
            if invocation["packet"]:
                messages = invocation["packet"]["messages"]
                assert (
                    f"({invocation['entered']}, at call {invocation['seqs'][0]}): {messages} message" in html
                )
    client.logout()


def names_an_agent(span: dict) -> bool:
    return any(entry["key"] in ("agent.name", "gen_ai.agent.name") for entry in span["attributes"])


def chunks(total: int, size: int, then_one_each: bool) -> list[tuple[int, int]]:
    """(start, end) of each request: ``size`` spans each, or the first ``size`` then one span each."""
    if then_one_each:
        return [(0, size)] + [(start, start + 1) for start in range(size, total)]
    return [(start, min(start + size, total)) for start in range(0, total, size)]


def sessions_view(runs: dict) -> list:
    """What must not depend on arrival order: runs, their calls' numbers, agents and invocations."""
    view = []
    for run in runs.values():
        calls = sorted(
            (
                call["span_id"],
                call["seq"],
                call["turn"],
                call["agent"],
                call["agent_invocation"],
                call["usage"],
            )
            for call in run["calls"]
        )
        invocations = sorted(json.dumps(entry, sort_keys=True) for entry in run["detail"]["invocations"])
        agents = sorted(json.dumps(agent, sort_keys=True) for agent in run["detail"]["agents"])
        detail = {k: run["detail"][k] for k in ("calls", "turns", "agent", "parent_run", "usage")}
        view.append((calls, invocations, agents, json.dumps(detail, sort_keys=True)))
    return sorted(view)


@pytest.mark.parametrize("name", AGENT_SCENARIOS)
def test_arrival_order_does_not_change_the_sessions(client, alice, django_capture_on_commit_callbacks, name):
    views = {}
    for order in ("recorded", "reversed", "shuffled", "pairs", "agents-last"):
        _project, key = factories.project_with_key(f"order-{order}", owner=alice)
        described, requests = fixture_batches(name, order)
        for body in requests:
            post_traces(client, django_capture_on_commit_callbacks, key, body)
        runs = read(client, key)
        check_sessions(name, described, runs)
        views[order] = sessions_view(runs)
        if order == "recorded":
            check_panel(client, alice, runs)
    assert views["reversed"] == views["recorded"]
    assert views["shuffled"] == views["recorded"]
    assert views["pairs"] == views["recorded"]
    assert views["agents-last"] == views["recorded"]
