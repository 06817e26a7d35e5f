"""The real Claude Code and Codex CLIs, their base URL on a ``ctxview proxy``, with only loopback reachable
(issue 35): the calls, usage and windows ctxview shows from the proxy's spans are what the fake provider
received and returned, and for Claude Code what its own telemetry reports.

``record.py --via-proxy`` runs the CLI's two-turn scenario in a loopback-only network namespace, with
``python -m ctxview.proxy`` between the CLI and the fake, exporting to a capturing receiver. Here the
proxy's exports go through ctxview's own receiver (the Django test client) and the read API, and each
call, joined to the fake's request by response id, is compared with the request body the fake received
(decoded: texts, tool arguments and schemas compared exactly) and the usage it answered with. ctxview
masks secrets before it stores anything (``ingest.redact``; Claude Code's prompt holds an e-mail
address), so the request's strings are compared as the project's redactor masks them: every other byte
is kept.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from tests.cli import fakes, live, record, view

SCENARIOS = ["claude-code-detailed", "codex"]
RESPONSE_ID = "gen_ai.response.id"
USAGE_1H = "anthropic.usage.cache_creation.ephemeral_1h_input_tokens"
CONTENT_LIMIT = 262_144  # the read API's largest: every item of these windows is smaller


@pytest.fixture(scope="module")
def via_proxy(tmp_path_factory):
    """Scenario -> its recording through the proxy; each CLI runs once per module (about 10 s each)."""
    done: dict[str, dict] = {}

    def run(scenario: str) -> dict:
        if scenario not in done:
            live.require(record.CLIS[record.SCENARIOS[scenario].cli])
            out = tmp_path_factory.mktemp(scenario)
            record.run_isolated(scenario, out, via_proxy=True)
            done[scenario] = json.loads((out / f"{scenario}.via-proxy.json").read_text())
        return done[scenario]

    return run


@pytest.fixture
def in_ctxview(client, key, django_capture_on_commit_callbacks):
    """A recording -> the calls ctxview made of the proxy's exports, with their items' content."""

    def ingest(document: dict) -> list[dict]:
        for export in document["proxy"]["exports"]:
            with django_capture_on_commit_callbacks(execute=True):
                response = client.post(
                    "/v1/traces",
                    json.dumps(export["body"]),
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {key}",
                )
            assert response.status_code == 200, response.content
        calls = []
        for run in api(client, key, "/api/v1/runs")["runs"]:
            for call in api(client, key, f"/api/v1/runs/{run['id']}/calls")["calls"]:
                calls.append(
                    api(client, key, f"/api/v1/calls/{call['id']}?content=1&content_limit={CONTENT_LIMIT}")
                )
        return calls

    return ingest


@pytest.fixture
def masked(project):
    """A value with every string in it (keys too) as the project's redactor stores it."""
    redactor = project.redactor()

    def mask(value: Any) -> Any:
        if isinstance(value, str):
            return redactor.mask(value)
        if isinstance(value, dict):
            return {mask(name): mask(item) for name, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(mask(item) for item in value)
        return value

    return mask


def api(client, key: str, path: str) -> dict:
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.content
    return response.json()


def paired(document: dict, calls: list[dict]) -> list[tuple[dict, dict, dict]]:
    """(the fake's request summary, its body decoded, ctxview's call), in the order the fake received
    them; a call is joined to its request by the response id the fake answered with."""
    spans = view.spans({"exports": document["proxy"]["exports"]})
    response_of = {span["span_id"]: span["attributes"].get(RESPONSE_ID) for span in spans}
    by_response = {response_of[call["span_id"]]: call for call in calls}
    bodies = document["provider"]["bodies"]
    return [
        (request, json.loads(bodies[request["index"]]), by_response[request["response_id"]])
        for request in view.model_requests(document)
    ]


# ---------------------------------------------------------------------------------------------
# What the fake answered and received, in ctxview's terms
# ---------------------------------------------------------------------------------------------
def usage_returned(api_name: str, usage: dict) -> dict:
    """The usage the fake answered with, as ctxview's call shows it (``prompt_total`` includes the cache)."""
    if api_name == fakes.ANTHROPIC:
        parts = {
            "uncached": usage["input_tokens"],
            "cache_write": usage["cache_creation_input_tokens"],
            "cache_read": usage["cache_read_input_tokens"],
            "output": usage["output_tokens"],
            "reasoning": None,
        }
        return parts | {"prompt_total": parts["uncached"] + parts["cache_write"] + parts["cache_read"]}
    details = usage["input_tokens_details"]
    return {
        "uncached": usage["input_tokens"] - details["cached_tokens"] - details["cache_write_tokens"],
        "cache_write": details["cache_write_tokens"],
        "cache_read": details["cached_tokens"],
        "output": usage["output_tokens"],
        "reasoning": usage["output_tokens_details"]["reasoning_tokens"],
        "prompt_total": usage["input_tokens"],
    }


def _texts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [content]
    return [
        part.get("text")
        for part in content or []
        if part.get("type") in ("text", "input_text", "output_text")
    ]


def _anthropic_values(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [content]
    values: list[Any] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            values.append(block["text"])
        elif kind == "tool_use":
            values.append(block["input"])
        elif kind == "tool_result":
            values += _texts(block.get("content"))
        else:  # thinking, server tools, media: kept whole, as ingest reads them (families.messages)
            values.append(block)
    return values


def _responses_message(item: dict) -> tuple[str, list[Any]]:
    kind = item.get("type", "message")
    if kind == "function_call":
        return "assistant", [json.loads(item["arguments"])]
    if kind == "function_call_output":
        return "tool", _texts(item["output"])
    assert kind == "message", f"an input item this test does not compare: {kind}"
    return item["role"], _texts(item["content"])


def request_window(api_name: str, body: dict) -> dict[str, list]:
    """The request body as a window: system texts, tools (type, name, description, schema, the rest),
    and messages (role, the texts and tool arguments each carries, in order)."""
    if api_name == fakes.ANTHROPIC:
        system = body.get("system") or []
        tools = [
            {
                "type": "function",
                "name": t["name"],
                "description": t.get("description"),
                "parameters": t.get("input_schema"),
            }
            for t in body.get("tools") or []
        ]
        return {
            "system": [system] if isinstance(system, str) else [block["text"] for block in system],
            "tools": sorted(tools, key=lambda tool: tool["name"]),
            "messages": [(m["role"], _anthropic_values(m["content"])) for m in body["messages"]],
        }
    instructions = body.get("instructions")
    # A function tool in the conventions' shape (its ``strict`` flag is not kept); the others whole.
    tools = [
        {
            "type": "function",
            "name": t["name"],
            "description": t.get("description"),
            "parameters": t.get("parameters"),
        }
        if t.get("type") == "function"
        else {"description": None, "parameters": None, "name": t.get("name") or t["type"]} | t
        for t in body.get("tools") or []
    ]
    return {
        "system": [instructions] if instructions else [],
        "tools": sorted(tools, key=lambda tool: tool["name"]),
        "messages": [_responses_message(item) for item in body["input"]],
    }


def _part_values(parts: list[dict]) -> list[Any]:
    values: list[Any] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" or kind == "reasoning":
            values.append(part["content"])
        elif kind == "tool_call":
            values.append(part["arguments"])
        elif kind == "tool_call_response":
            values += _texts(part["response"])
        else:
            values.append(part)
    return values


def shown_window(call: dict) -> dict[str, list]:
    """The window ctxview shows for a call, in the same terms as ``request_window``."""
    assert not any(item["content_truncated"] for item in call["items"]), "an item was cut: compare its prefix"
    window: dict[str, list] = {"system": [], "tools": [], "messages": []}
    for item in call["items"]:
        if item["kind"] == "tool":
            tool = json.loads(item["content"])
            window["tools"].append({"description": None, "parameters": None} | tool)
        elif item["id"].startswith("system:"):  # a system instruction, not a message with role system
            window["system"].append(item["content"])
        else:
            message = json.loads(item["content"])
            window["messages"].append((message["role"], _part_values(message["parts"])))
    window["tools"].sort(key=lambda tool: tool["name"])
    return window


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------
@pytest.mark.cli
@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_model_request_is_one_call_with_the_usage_the_fake_returned(scenario, via_proxy, in_ctxview):
    document = via_proxy(scenario)
    api_name = record.SCENARIOS[scenario].api
    requests = view.model_requests(document)
    calls = in_ctxview(document)
    steps = {step["step"] for step in document["provider"]["script"]}
    assert {request["step"] for request in requests if request["step"]} == steps
    assert len(calls) == len(requests)
    for request, _body, call in paired(document, calls):
        assert call["usage"] == usage_returned(api_name, request["usage"]), request["step"]
        assert call["request_model"] == request["model"] and call["content_captured"] is True
        if api_name == fakes.ANTHROPIC:
            assert (
                call["usage_reported"][USAGE_1H]
                == request["usage"]["cache_creation"][USAGE_1H.rsplit(".", 1)[1]]
            )


@pytest.mark.cli
@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_window_is_the_request_body_the_fake_received(scenario, via_proxy, in_ctxview, masked):
    document = via_proxy(scenario)
    api_name = record.SCENARIOS[scenario].api
    pairs = paired(document, in_ctxview(document))
    assert pairs
    for request, body, call in pairs:
        expected, shown = masked(request_window(api_name, body)), shown_window(call)
        assert shown["system"] == expected["system"], request["step"]
        assert shown["tools"] == expected["tools"], request["step"]
        assert len(shown["messages"]) == len(expected["messages"]), request["step"]
        for number, (got, want) in enumerate(zip(shown["messages"], expected["messages"], strict=True)):
            assert got == want, f"{request['step']}: message {number}"


@pytest.mark.cli
@pytest.mark.django_db
def test_claude_codes_own_telemetry_reports_the_same_usage(via_proxy, in_ctxview):
    """With OTEL_LOG_RAW_API_BODIES=1 (the detailed scenario): each api_request log record, joined by the
    request id the fake answered with, reports the usage ctxview shows from the proxy."""
    document = via_proxy("claude-code-detailed")
    assert document["env"]["OTEL_LOG_RAW_API_BODIES"] == "1"
    logs = {
        item["attributes"]["request_id"]: item["attributes"]
        for item in view.named(view.logs(document), "api_request")
    }
    pairs = paired(document, in_ctxview(document))
    assert set(logs) == {request["request_id"] for request, _body, _call in pairs}
    for request, _body, call in pairs:
        reported = logs[request["request_id"]]
        assert call["usage"] | {"reasoning": None} == {
            "uncached": reported["input_tokens"],
            "cache_write": reported["cache_creation_tokens"],
            "cache_read": reported["cache_read_tokens"],
            "output": reported["output_tokens"],
            "reasoning": None,
            "prompt_total": reported["input_tokens"]
            + reported["cache_creation_tokens"]
            + reported["cache_read_tokens"],
        }, request["step"]
        assert call["usage_reported"][USAGE_1H] == reported["cache_creation_1h_tokens"]


@pytest.mark.cli
@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_provider_key_is_in_no_exported_span_nor_table(scenario, via_proxy, in_ctxview):
    document = via_proxy(scenario)
    assert document["provider"]["key_reached_the_fake"] is True  # through the proxy: not a vacuous check
    assert record.FAKE_KEY not in json.dumps(document["proxy"])
    raw = record.CACHE / "runs" / f"{scenario}.via-proxy" / "proxy-otlp"
    exported = sorted(raw.iterdir())
    assert exported and not any(record.FAKE_KEY.encode() in path.read_bytes() for path in exported)
    assert in_ctxview(document)
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for value in row:
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    assert record.FAKE_KEY not in text, table
