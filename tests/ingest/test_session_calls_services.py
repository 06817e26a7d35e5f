"""The coding CLIs' recordings through the live server, a real Celery worker and the read API.

Each export body is posted as the CLI sent it (OTLP/JSON), as recorded and in reverse; the read API
must show the same session either way, with exact usage, turns, subagents and (Claude Code detailed)
the window's items.
"""

import json
import urllib.request

import pytest

from ingest.models import RawBatch, Run
from tests import services
from tests.cli import view

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def post(url: str, key: str, export: dict) -> None:
    request = urllib.request.Request(
        f"{url}/v1/{export['signal']}",
        data=json.dumps(export["body"]).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200


def send(url: str, key: str, scenario: str, order: str) -> int:
    exports = [e for e in view.load(scenario)["exports"] if e["signal"] in ("traces", "logs")]
    for export in reversed(exports) if order == "reversed" else exports:
        post(url, key, export)
    return len(exports)


def processed(batches: int):
    def check():
        statuses = list(RawBatch.objects.values_list("status", flat=True))
        runs = list(Run.objects.all())
        analysed = bool(runs) and all(run.analysed_seq == run.call_count > 0 for run in runs)
        return len(statuses) == batches and set(statuses) == {"done"} and analysed

    return check


def read(client, key: str) -> tuple[dict, list[dict]]:
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **auth).json()["runs"]
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **auth).json()["calls"]
    return run, calls


@pytest.mark.parametrize("order", ["as-recorded", "reversed"])
def test_a_claude_code_detailed_session_through_the_worker(worker, live_server, client, key, order):
    batches = send(live_server.url, key, "claude-code-detailed", order)
    services.wait_for(processed(batches), 60, "the worker to process the recording")
    run, calls = read(client, key)
    doc = view.load("claude-code-detailed")
    requests = view.model_requests(doc)  # in the order the CLI made them
    assert (run["calls"], run["turns"], run["agent"]) == (len(requests), 2, "claude-code")
    assert run["usage"]["cache_read"] == sum(r["usage"]["cache_read_input_tokens"] for r in requests)
    for call, request in zip(calls, requests, strict=True):
        usage = request["usage"]
        assert call["usage"]["uncached"] == usage["input_tokens"]
        assert call["usage"]["cache_read"] == usage["cache_read_input_tokens"]
        assert call["usage"]["cache_write"] == usage["cache_creation_input_tokens"]
        assert call["usage"]["output"] == usage["output_tokens"]
        assert call["agent"] == ("general-purpose" if request["step"].startswith("sub") else None)
        assert call["turn"] == (2 if request["step"] == "turn-2" else 1)
        tools = [item for item in call["items"] if item["bucket"] == "tools"]
        assert len(tools) == request["tool_count"]
        assert any(item["id"].startswith("system:") for item in call["items"])
        assert call["cache"]["broke"] is False  # the subagent breaks nothing
        assert call["usage_reported"]["reported.cost_usd"] > 0


@pytest.mark.parametrize("order", ["as-recorded", "reversed"])
def test_a_gemini_cli_session_through_the_worker(worker, live_server, client, key, order):
    batches = send(live_server.url, key, "gemini-cli", order)
    services.wait_for(processed(batches), 60, "the worker to process the recording")
    run, calls = read(client, key)
    requests = view.model_requests(view.load("gemini-cli"))
    assert (run["calls"], run["turns"]) == (len(requests), 2)
    for call, request in zip(calls, requests, strict=True):
        assert call["usage"]["prompt_total"] == request["usage"]["promptTokenCount"]
        assert call["usage"]["cache_read"] == request["usage"]["cachedContentTokenCount"]
        assert call["turn"] == (2 if request["step"] == "turn-2" else 1)
