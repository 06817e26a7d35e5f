"""The emitted span: GenAI attributes, usage, and the manifest exactly as the ingest side will read it."""

import json
import logging
from datetime import UTC, datetime

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import ctxview_sdk
from ctxview_sdk.call import MAX_MANIFEST_CHARS
from ctxview_sdk.manifest import MAX_ITEMS, content_hash

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
T0_NS = 1767323045 * 10**9


def item(**fields):
    """A manifest item as the SDK writes it: every field, unknowns as null."""
    base = {
        "role": None,
        "mode": "verbatim",
        "tokens": None,
        "tokens_estimated": False,
        "version": None,
        "source": None,
        "trust": None,
        "supersedes": [],
        "pinned": False,
        "origin_turn": None,
        "cache_breakpoint": False,
        "content": None,
        "content_truncated": False,
    }
    return base | fields


def manifest(span):
    return json.loads(span.attributes["ctxview.manifest"])


def test_a_manual_call_emits_one_genai_span_with_the_manifest(finished):
    with ctxview_sdk.call(
        "run-7", 3, "claude-sonnet-4-5", prompt_version="coding-v12", start_time=T0
    ) as call:
        call.set_budget(limit=200_000, reserved_output=8192)
        call.set_budget(input=41_820)
        call.add_item(
            "rule:no-api-change",
            "rule",
            "system",
            content="Do not change the API.",
            tokens=6,
            role="system",
            trust="user",
            pinned=True,
            origin_turn=1,
            cache_breakpoint=True,
        )
        call.add_item(
            "file:orders/client.py",
            "file",
            "retrieved",
            hash="0123456789abcdef0123456789abcdef",
            mode="excerpt",
            tokens=3100,
            version="sha256:def",
            source="orders/client.py",
            trust="tool",
            supersedes="file:orders/client.py@abc",
            origin_turn=2,
        )
        call.exclude("search:1", "stage_complete", tokens=900, kind="tool_result", source="search")
        call.exclude("file:orders/client.py@abc", "superseded", version="sha256:abc")
        call.set_usage(
            {
                "input_tokens": 100,
                "cache_read_input_tokens": 40_000,
                "cache_creation_input_tokens": 1720,
                "output_tokens": 512,
            }
        )
        call.set_response(
            model="claude-sonnet-4-5-20250929", response_id="msg_01", finish_reasons=["end_turn"]
        )
    (span,) = finished()

    assert span.name == "chat claude-sonnet-4-5"
    assert span.kind is SpanKind.CLIENT
    assert span.start_time == T0_NS and span.end_time >= T0_NS
    assert span.resource.attributes["service.name"] == "agent"
    attributes = dict(span.attributes)
    assert json.loads(attributes.pop("ctxview.manifest")) == {
        "schema": "ctxview.manifest/1",
        "prompt_version": "coding-v12",
        "budget": {"limit": 200_000, "input": 41_820, "reserved_output": 8192},
        "items": [
            item(
                id="rule:no-api-change",
                kind="rule",
                bucket="system",
                hash=content_hash("Do not change the API."),
                role="system",
                tokens=6,
                trust="user",
                pinned=True,
                origin_turn=1,
                cache_breakpoint=True,
            ),
            item(
                id="file:orders/client.py",
                kind="file",
                bucket="retrieved",
                hash="0123456789abcdef0123456789abcdef",
                mode="excerpt",
                tokens=3100,
                version="sha256:def",
                source="orders/client.py",
                trust="tool",
                supersedes=["file:orders/client.py@abc"],
                origin_turn=2,
            ),
        ],
        "excluded": [
            {
                "id": "search:1",
                "reason": "stage_complete",
                "tokens": 900,
                "kind": "tool_result",
                "source": "search",
                "version": None,
            },
            {
                "id": "file:orders/client.py@abc",
                "reason": "superseded",
                "tokens": None,
                "kind": None,
                "source": None,
                "version": "sha256:abc",
            },
        ],
    }
    assert attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-5",
        "gen_ai.response.model": "claude-sonnet-4-5-20250929",
        "gen_ai.response.id": "msg_01",
        "gen_ai.response.finish_reasons": ("end_turn",),
        "gen_ai.conversation.id": "run-7",
        "gen_ai.usage.input_tokens": 41_820,
        "gen_ai.usage.output_tokens": 512,
        "gen_ai.usage.cache_read.input_tokens": 40_000,
        "gen_ai.usage.cache_creation.input_tokens": 1720,
        "ctxview.run.id": "run-7",
        "ctxview.turn": 3,
        "ctxview.sdk.version": ctxview_sdk.__version__,
    }


def test_manifest_json_is_compact(finished):
    with ctxview_sdk.call("r", 1, "m") as call:
        call.add_item("a", "fact", "memory", content="x")
    (span,) = finished()
    text = span.attributes["ctxview.manifest"]
    assert text == json.dumps(json.loads(text), ensure_ascii=False, separators=(",", ":"))


def test_record_anthropic_is_one_line(finished):
    request = {
        "model": "claude-haiku-4-5",
        "max_tokens": 512,
        "system": "Be brief.",
        "tools": [{"name": "search", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = {
        "id": "msg_9",
        "model": "claude-haiku-4-5-20251001",
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 20, "cache_read_input_tokens": None, "output_tokens": 3},
    }
    ctxview_sdk.record_anthropic(
        "run-1",
        1,
        request,
        response,
        excluded=[("msg:old", "sliding_window")],
        start_time=T0_NS,
        end_time=T0_NS + 10**9,
    )
    (span,) = finished()
    assert (span.start_time, span.end_time) == (T0_NS, T0_NS + 10**9)
    assert span.attributes["gen_ai.usage.input_tokens"] == 20
    assert "gen_ai.usage.cache_read.input_tokens" not in span.attributes
    assert span.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    data = manifest(span)
    assert [entry["id"] for entry in data["items"]] == [
        "tool:search",
        "system:0",
        ctxview_sdk.message_id("user", "hi"),
    ]
    assert all(entry["content"] is None and entry["tokens_estimated"] for entry in data["items"])
    assert data["excluded"][0]["reason"] == "sliding_window"
    assert data["budget"]["reserved_output"] == 512


def test_record_openai_reads_the_chat_response(finished):
    request = {
        "model": "gpt-5",
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    }
    response = {
        "id": "chatcmpl-1",
        "model": "gpt-5-2025",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "a"}}],
        "usage": {
            "prompt_tokens": 2006,
            "completion_tokens": 10,
            "prompt_tokens_details": {"cached_tokens": 1920},
        },
    }
    ctxview_sdk.record_openai("run-2", 4, request, response)
    (span,) = finished()
    assert span.attributes["gen_ai.provider.name"] == "openai"
    assert span.attributes["gen_ai.usage.input_tokens"] == 2006
    assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 1920
    assert span.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert [entry["bucket"] for entry in manifest(span)["items"]] == ["system", "conversation"]


def test_content_is_sent_only_when_asked_redacted_and_cut(configure_memory):
    memory = configure_memory(send_content=True, content_limit=10)
    with ctxview_sdk.call("r", 1, "m") as call:
        call.add_item("exact", "fact", "memory", content="x" * 10)
    ctxview_sdk.flush()
    (exact,) = manifest(memory.get_finished_spans()[0])["items"]
    assert (exact["content"], exact["content_truncated"]) == ("x" * 10, False)
    ctxview_sdk.shutdown()

    memory = configure_memory(
        send_content=True, content_limit=10, redact=lambda text: text.replace("hunter2", "***")
    )
    with ctxview_sdk.call("r", 1, "m") as call:
        call.add_item("short", "fact", "memory", content="pw hunter2")
        call.add_item("long", "fact", "memory", content="x" * 11)
    ctxview_sdk.flush()
    short, long = manifest(memory.get_finished_spans()[0])["items"]
    # Redacted text no longer matches the hash of what the model read: flagged, like a cut one.
    assert (short["content"], short["content_truncated"], short["hash"]) == (
        "pw ***",
        True,
        content_hash("pw hunter2"),
    )
    assert (long["content"], long["content_truncated"]) == ("x" * 10, True)


def test_a_failing_redact_hook_withholds_the_content(configure_memory, caplog):
    def redact(text):
        raise RuntimeError("boom")

    memory = configure_memory(send_content=True, redact=redact)
    with caplog.at_level(logging.ERROR, logger="ctxview_sdk"), ctxview_sdk.call("r", 1, "m") as call:
        call.add_item("a", "fact", "memory", content="secret")
    ctxview_sdk.flush()
    (entry,) = manifest(memory.get_finished_spans()[0])["items"]
    assert (entry["content"], entry["content_truncated"]) == (None, True)
    assert "redact hook failed" in caplog.text


def test_an_exception_in_the_block_is_recorded_and_propagates(finished):
    with pytest.raises(KeyError), ctxview_sdk.call("r", 1, "m"):
        raise KeyError("oops")
    (span,) = finished()
    assert span.attributes["error.type"] == "KeyError"
    assert span.status.status_code is StatusCode.ERROR


def test_explicit_start_without_end_keeps_the_synthetic_timeline(finished):
    ctxview_sdk.call("r", 1, "m", start_time=datetime(2026, 1, 2, 3, 4, 5)).end()  # naive means UTC
    (span,) = finished()
    assert span.start_time == T0_NS
    assert 0 <= span.end_time - T0_NS < 5 * 10**9


def test_end_is_idempotent(finished):
    call = ctxview_sdk.call("r", 1, "m")
    call.end()
    call.end()
    assert len(finished()) == 1


@pytest.mark.parametrize(
    "arguments",
    [
        {"run_id": "", "turn": 1, "model": "m"},
        {"run_id": "r", "turn": 0, "model": "m"},
        {"run_id": "r", "turn": True, "model": "m"},
        {"run_id": "r", "turn": 1, "model": "m", "start_time": 1.5},
    ],
)
def test_bad_call_arguments_raise_value_error(arguments):
    with pytest.raises(ValueError):
        ctxview_sdk.call(**arguments)


def test_programming_errors_in_items_raise_value_error():
    call = ctxview_sdk.call("r", 1, "m")
    with pytest.raises(ValueError, match="bucket"):
        call.add_item("a", "fact", "facts", content="x")
    with pytest.raises(ValueError, match="content or its hash"):
        call.add_item("a", "fact", "memory")
    with pytest.raises(ValueError, match="not the hash"):
        call.add_item("a", "fact", "memory", content="x", hash="0" * 32)
    call.add_item("a", "fact", "memory", content="x")
    with pytest.raises(ValueError, match="already"):
        call.add_item("a", "fact", "memory", content="y")
    with pytest.raises(ValueError, match="already"):
        call.exclude("a", "duplicate")
    with pytest.raises(ValueError):
        call.set_budget(limit=-1)
    with pytest.raises(ValueError):
        call.end(end_time=datetime(1999, 1, 1, tzinfo=UTC))


def test_recording_without_configure_does_not_raise():
    ctxview_sdk.shutdown()
    ctxview_sdk.record_anthropic("r", 1, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})


def test_items_beyond_the_bound_are_dropped_and_counted(finished):
    call = ctxview_sdk.call("r", 1, "m")
    for number in range(MAX_ITEMS + 2):
        call.add_item(f"i{number}", "fact", "memory", hash="0" * 32)
    call.end()
    (span,) = finished()
    assert len(manifest(span)["items"]) == MAX_ITEMS
    assert span.attributes["ctxview.manifest.dropped_items"] == 2


def test_a_manifest_too_large_goes_without_contents(configure_memory):
    memory = configure_memory(send_content=True, content_limit=65536)
    with ctxview_sdk.call("r", 1, "m") as call:
        for number in range(MAX_MANIFEST_CHARS // 65536 + 2):
            call.add_item(f"i{number}", "file", "retrieved", content=str(number) * 65536, tokens=1)
    ctxview_sdk.flush()
    span = memory.get_finished_spans()[0]
    assert len(span.attributes["ctxview.manifest"]) < MAX_MANIFEST_CHARS
    assert all(entry["content"] is None and entry["content_truncated"] for entry in manifest(span)["items"])


def test_content_that_is_not_json_raises_value_error():
    with pytest.raises(ValueError, match="JSON"):
        ctxview_sdk.call("r", 1, "m").add_item("a", "fact", "memory", content={"when": datetime.now()})


def test_the_agents_otel_environment_cannot_cut_or_drop_manifests(monkeypatch, configure_memory):
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "10")
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "3")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    memory = configure_memory()
    with ctxview_sdk.call("r", 1, "m") as call:
        call.add_item("a", "fact", "memory", content="x" * 100)
    ctxview_sdk.flush()
    (span,) = memory.get_finished_spans()
    assert len(manifest(span)["items"]) == 1 and span.attributes["ctxview.turn"] == 1


def test_the_models_tool_calls_are_sent_as_output_messages(finished):
    response = {
        "id": "msg_1",
        "model": "claude-sonnet-4-5",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {"path": "/var/log/app"}},
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    request = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "why?"}]}
    ctxview_sdk.record_anthropic("run-1", 1, request, response)
    [span] = finished()
    assert json.loads(span.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "toolu_1",
                    "name": "read_log",
                    "arguments": {"path": "/var/log/app"},
                }
            ],
        }
    ]


def test_a_call_without_tool_calls_sends_no_output_messages(finished):
    with ctxview_sdk.call("run-1", 1, "m") as call:
        call.add_item("a", "message", "conversation", content="hi")
    [span] = finished()
    assert "gen_ai.output.messages" not in span.attributes


def test_asking_anthropic_for_its_cache_diagnosis_is_opt_in():
    request = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    assert ctxview_sdk.ask_cache_diagnostics(request, None) == request
    asked = ctxview_sdk.ask_cache_diagnostics(request, {"id": "msg_1", "type": "message"})
    assert asked == {**request, "diagnostics": {"previous_message_id": "msg_1"}}
    assert "diagnostics" not in request  # the caller's request is left alone
    assert ctxview_sdk.ask_cache_diagnostics(request, "msg_2")["diagnostics"] == {
        "previous_message_id": "msg_2"
    }
    with pytest.raises(ValueError, match="previous must be"):
        ctxview_sdk.ask_cache_diagnostics(request, {"type": "message"})


def test_record_anthropic_sends_the_providers_cache_diagnosis(finished):
    request = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    reasons = [
        {"type": "tools_changed", "cache_missed_input_tokens": 1824},
        {"type": "previous_message_not_found"},
        None,  # still pending: nothing to send
    ]
    for reason in reasons:
        response = {
            "id": "msg_2",
            "model": "claude-haiku-4-5",
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 20, "output_tokens": 3},
            "diagnostics": {"cache_miss_reason": reason},
        }
        ctxview_sdk.record_anthropic(
            "run-1", 2, ctxview_sdk.ask_cache_diagnostics(request, "msg_1"), response
        )
    first, second, third = finished()
    assert first.attributes["anthropic.diagnostics.cache_miss_reason.type"] == "tools_changed"
    assert first.attributes["anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens"] == 1824
    assert second.attributes["anthropic.diagnostics.cache_miss_reason.type"] == "previous_message_not_found"
    assert "anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens" not in second.attributes
    assert not [key for key in third.attributes if key.startswith("anthropic.diagnostics.")]
