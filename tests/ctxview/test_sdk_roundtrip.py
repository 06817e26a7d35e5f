"""A manifest sent with the ctxview SDK and the real OTLP exporter comes back field by field."""

from datetime import UTC, datetime

import ctxview_sdk
from ctxview_sdk import content_hash


def test_every_manifest_field_survives_the_trip(live_server, client, key):
    ctxview_sdk.configure(live_server.url, key=key, service_name="sdk-roundtrip", send_content=True)
    at = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    with ctxview_sdk.call("run-sdk", 3, "claude-sonnet-4-5", prompt_version="p-12", start_time=at) as call:
        call.add_item(
            "tool:search", "tool", "tools", content={"name": "search", "input_schema": {}}, tokens=40
        )
        call.add_item(
            "rule:api",
            "rule",
            "system",
            content="Do not change the public API.",
            role="system",
            pinned=True,
            trust="user",
            origin_turn=1,
            cache_breakpoint=True,
        )
        call.add_item(
            "file:billing.ts@v2",
            "file",
            "retrieved",
            content="export const v = 2;",
            role="user",
            mode="excerpt",
            version="v2",
            source="src/api/billing.ts",
            trust="tool",
            supersedes=["file:billing.ts@v1"],
            tokens=9,
        )
        call.exclude(
            "file:billing.ts@v1",
            "superseded",
            tokens=8,
            kind="file",
            source="src/api/billing.ts",
            version="v1",
        )
        call.exclude("msg:old", "sliding_window", tokens=120)
        call.set_budget(limit=200_000, reserved_output=8_000, input=1_234)
        call.set_usage(
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 1000,
                "cache_creation_input_tokens": 224,
                "output_tokens": 77,
            }
        )
        call.add_tool_call("search", id="toolu_1")
    assert ctxview_sdk.flush(timeout=10)
    ctxview_sdk.shutdown(timeout=5)

    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **auth).json()["runs"]
    assert (run["key"], run["key_source"], run["service"]) == ("run-sdk", "ctxview.run.id", "sdk-roundtrip")
    [listed] = client.get(f"/api/v1/runs/{run['id']}/calls", **auth).json()["calls"]
    call = client.get(f"/api/v1/calls/{listed['id']}?content=1", **auth).json()

    assert (call["turn"], call["manifest_source"], call["manifest_error"], call["prompt_version"]) == (
        3,
        "explicit",
        None,
        "p-12",
    )
    assert call["usage"] == {
        "uncached": 10,
        "cache_write": 224,
        "cache_read": 1000,
        "output": 77,
        "reasoning": None,
        "prompt_total": 1234,
    }
    assert call["budget"] == {"limit": 200_000, "input": 1_234, "reserved_output": 8_000}
    assert call["tool_calls"] == [{"name": "search", "id": "toolu_1"}]
    tool, rule, file = call["items"]
    assert (tool["id"], tool["bucket"], tool["tokens"], tool["tokens_estimated"]) == (
        "tool:search",
        "tools",
        40,
        False,
    )
    assert tool["content"] == '{"name":"search","input_schema":{}}'
    assert (rule["pinned"], rule["trust"], rule["origin_turn"], rule["cache_breakpoint"], rule["role"]) == (
        True,
        "user",
        1,
        True,
        "system",
    )
    assert rule["tokens_estimated"] is True
    assert rule["hash"] == content_hash("Do not change the public API.")
    assert (file["mode"], file["version"], file["source"], file["supersedes"], file["position"]) == (
        "excerpt",
        "v2",
        "src/api/billing.ts",
        ["file:billing.ts@v1"],
        2,
    )
    assert call["excluded"] == [
        {
            "id": "file:billing.ts@v1",
            "reason": "superseded",
            "tokens": 8,
            "kind": "file",
            "source": "src/api/billing.ts",
            "version": "v1",
        },
        {
            "id": "msg:old",
            "reason": "sliding_window",
            "tokens": 120,
            "kind": None,
            "source": None,
            "version": None,
        },
    ]


def test_anthropics_cache_diagnosis_is_shown_beside_ours(live_server, client, key, alice):
    """The SDK asks for the diagnosis (opt-in), records it; the call shows it beside ctxview's own cause."""
    ctxview_sdk.configure(live_server.url, key=key, service_name="sdk-diagnosis")
    system = [
        {
            "type": "text",
            "text": "You answer billing questions. " * 400,
            "cache_control": {"type": "ephemeral"},
        }
    ]
    tools = [{"name": "get_invoice", "input_schema": {"type": "object"}}]
    first = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": system, "tools": tools}
    first["messages"] = [{"role": "user", "content": "Why was I charged twice?"}]
    at = datetime(2026, 11, 20, 12, 0, tzinfo=UTC).timestamp()
    answer = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "cache_creation_input_tokens": 3000, "output_tokens": 9},
    }
    ctxview_sdk.record_anthropic("run-diag", 1, first, answer, start_time=int(at * 1e9))
    # The next call adds a tool in front: its prefix differs from the first tool on.
    second = ctxview_sdk.ask_cache_diagnostics(
        {**first, "tools": [{"name": "refund", "input_schema": {"type": "object"}}, *tools]}, answer
    )
    assert second["diagnostics"] == {"previous_message_id": "msg_1"}
    diagnosed = {
        "id": "msg_2",
        "model": "claude-sonnet-4-5",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "cache_creation_input_tokens": 3010, "output_tokens": 9},
        "diagnostics": {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": 2990}},
    }
    ctxview_sdk.record_anthropic("run-diag", 1, second, diagnosed, start_time=int((at + 5) * 1e9))
    assert ctxview_sdk.flush(timeout=10)
    ctxview_sdk.shutdown(timeout=5)

    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **auth).json()["runs"]
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **auth).json()["calls"]
    detail = client.get(f"/api/v1/calls/{calls[1]['id']}", **auth).json()
    assert detail["usage_reported"]["anthropic.diagnostics.cache_miss_reason.type"] == "tools_changed"
    assert (
        detail["usage_reported"]["anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens"] == 2990
    )
    assert detail["cache"]["provider_diagnosis"] == "tools_changed"
    assert detail["cache"]["cause"] == "tools_changed"  # ours agrees
    assert detail["cache"]["disagrees"] is False

    client.force_login(alice)
    page = client.get(f"/calls/{calls[1]['id']}/").content.decode()
    assert "<code>tools_changed</code>, about 2,990 tokens it could have read from cache" in page
