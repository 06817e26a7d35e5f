"""Interpreting spans of each family: classification, run keys, content, items. No database."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcore.analysis import limits
from ctxcore.vocabulary import digest, render
from ingest import normalise
from ingest.families.messages import message


def span(attributes, events=(), name="chat m", trace_id="a" * 32, span_id="b" * 16, parent=""):
    return {
        "trace_id": trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "name": name,
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
        "attributes": attributes,
        "events": list(events),
        "scope_name": "s",
        "scope_version": "1",
    }


def fixed_tokens(content_hash, text):
    return len(text)


@pytest.mark.parametrize(
    "attributes, name, expected",
    [
        ({"gen_ai.operation.name": "chat"}, "x", "model_call"),
        ({"gen_ai.operation.name": "generate_content"}, "x", "model_call"),
        ({"openinference.span.kind": "LLM"}, "x", "model_call"),
        ({"llm.request.type": "chat"}, "anthropic.chat", "model_call"),
        ({"gen_ai.operation.name": "execute_tool"}, "x", "tool"),
        ({"openinference.span.kind": "TOOL"}, "x", "tool"),
        ({"gen_ai.operation.name": "invoke_agent"}, "x", "agent"),
        ({"traceloop.span.kind": "workflow"}, "x", "agent"),
        ({}, "agent run", "agent"),
        ({"gen_ai.operation.name": "embeddings"}, "x", None),
        ({"http.method": "GET"}, "GET /", None),
    ],
)
def test_classify(attributes, name, expected):
    assert normalise.classify(name, attributes) == expected


@pytest.mark.parametrize(
    "attributes, expected",
    [
        ({"ctxview.run.id": "r1", "gen_ai.conversation.id": "c1"}, ("r1", "ctxview.run.id")),
        ({"gen_ai.conversation.id": "c1", "session.id": "s1"}, ("c1", "gen_ai.conversation.id")),
        ({"gen_ai.conversation.id": "", "session.id": "s1"}, ("s1", "session.id")),  # pydantic-ai may send ''
        (
            {"traceloop.association.properties.session_id": "t1"},
            ("t1", "traceloop.association.properties.session_id"),
        ),
        ({}, ("f" * 32, "trace_id")),
    ],
)
def test_run_key_preference(attributes, expected):
    assert normalise.run_key(attributes, "f" * 32) == expected


OTEL_MESSAGES = [
    {"role": "system", "parts": [{"type": "text", "content": "Be terse."}]},
    {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    {
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}}],
    },
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "rain"}]},
]
TOOLS = [{"type": "function", "name": "weather", "description": "Weather.", "parameters": {"type": "object"}}]


def test_otel_content_becomes_items_in_render_order():
    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.tool.definitions": json.dumps(TOOLS),
                "gen_ai.input.messages": json.dumps(OTEL_MESSAGES),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "tool_call", "id": "c2", "name": "forecast", "arguments": "{}"}
                            ],
                            "finish_reason": "tool_call",
                        }
                    ]
                ),
            }
        ),
        {"service.name": "svc"},
        count=fixed_tokens,
    )
    assert [(item.kind, item.bucket, item.role) for item in record.items] == [
        ("tool", "tools", None),
        ("system", "system", "system"),
        ("message", "conversation", "user"),
        ("message", "conversation", "assistant"),
        ("tool_result", "tool_results", "tool"),
    ]
    assert record.items[0].id == "tool:weather"
    assert record.items[0].hash == digest(render(TOOLS[0]))
    assert record.items[2].id == "msg:" + digest(render(OTEL_MESSAGES[1]))[:12]
    assert [item.position for item in record.items] == [0, 1, 2, 3, 4]
    assert record.items[2].tokens == len("Weather in Paris?") + 4
    assert record.content_captured and record.manifest_source == "derived"
    assert record.tool_calls == ({"name": "forecast", "id": "c2"},)
    assert record.tool_definitions == ("weather",)
    assert record.user_fingerprint == digest(render(OTEL_MESSAGES[1]))
    assert record.service == "svc"


def test_a_user_message_of_only_tool_results_is_a_tool_result_and_not_a_new_turn():
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "x", "response": "42"}]},
    ]
    record = normalise.call_record(
        span({"gen_ai.operation.name": "chat", "gen_ai.input.messages": messages}), {}, count=fixed_tokens
    )
    assert record.items[1].kind == "tool_result"
    assert record.user_fingerprint == digest(render(messages[0]))


def test_a_tool_result_names_the_tool_it_answers():
    attributes = {  # openinference-instrumentation-crewai 1.1.21's history: the name as a Python literal
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "The weather in Paris?",
        "llm.input_messages.1.message.role": "assistant",
        "llm.input_messages.1.message.tool_calls.0.tool_call.id": "call_1",
        "llm.input_messages.1.message.tool_calls.0.tool_call.function.name": "'get_weather'",
        "llm.input_messages.2.message.role": "tool",
        "llm.input_messages.2.message.content": "18C",
        "llm.input_messages.2.message.tool_call_id": "call_1",
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.content": "?",
        "llm.input_messages.3.message.tool_call_id": "call_unknown",
    }
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert [(item.kind, item.source) for item in record.items] == [
        ("message", None),
        ("message", None),
        ("tool_result", "get_weather"),
        ("tool_result", None),  # answers no call in the window: its tool is not known
    ]


def test_the_same_message_keeps_its_id_across_calls_and_repeats_get_a_suffix():
    first = [OTEL_MESSAGES[1]]
    second = [
        OTEL_MESSAGES[1],
        {"role": "assistant", "parts": [{"type": "text", "content": "ok"}]},
        OTEL_MESSAGES[1],
    ]
    one = normalise.derive_items(None, None, [message(m["role"], m["parts"]) for m in first], fixed_tokens)
    two = normalise.derive_items(None, None, second, fixed_tokens)
    assert one[0].id == two[0].id
    assert two[2].id == two[0].id + "#2"


def test_openinference_flattened_messages_and_tools():
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be terse.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.contents.0.message_content.type": "text",
        "llm.input_messages.1.message.contents.0.message_content.text": "Weather?",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "c1",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "weather",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
        "llm.input_messages.10.message.role": "user",
        "llm.input_messages.10.message.content": "rain",
        "llm.input_messages.10.message.tool_call_id": "c1",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "forecast",
        "llm.tools.0.tool.json_schema": json.dumps({"name": "weather", "input_schema": {"type": "object"}}),
        "llm.token_count.prompt": 10,
    }
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert [(item.kind, item.role) for item in record.items] == [
        ("tool", None),
        ("system", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_result", "user"),
    ]
    assert record.tool_definitions == ("weather",)
    assert record.tool_calls == ({"name": "forecast", "id": None},)
    kept = normalise.without_content(attributes, record.moved_keys)
    assert kept == {
        "openinference.span.kind": "LLM",
        "llm.token_count.prompt": 10,
        "ctxview.content_moved": ["llm.tools.", "llm.input_messages.", "llm.output_messages."],
    }


def test_an_openinference_tool_result_whose_text_has_no_value_is_read_without_it():
    # An attribute sent with an empty AnyValue decodes to None (found by the deep fuzz run).
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "tool",
        "llm.input_messages.0.message.contents.0.message_content.text": None,
        "llm.input_messages.0.message.contents.1.message_content.text": "rain",
        "llm.input_messages.0.message.tool_call_id": "c1",
    }
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert [(item.kind, item.role) for item in record.items] == [("tool_result", "tool")]


def test_legacy_openllmetry_prompts_with_anthropic_blocks():
    attributes = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be terse.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": json.dumps(
            [{"type": "tool_result", "tool_use_id": "t1", "content": "rain"}]
        ),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "t2",
        "gen_ai.completion.0.tool_calls.0.name": "forecast",
        "llm.request.functions.0.name": "weather",
        "llm.request.functions.0.input_schema": '{"type": "object"}',
    }
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert [(item.kind, item.bucket) for item in record.items] == [
        ("tool", "tools"),
        ("system", "system"),
        ("tool_result", "tool_results"),
    ]
    assert record.tool_calls == ({"name": "forecast", "id": "t2"},)
    assert record.user_fingerprint is None


@pytest.mark.parametrize(
    "attributes",
    [
        # A plain value where OpenInference nests keys (untrusted: these raised AttributeError).
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message": "hi",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.contents.0.message_content": "hi",
            "llm.input_messages.2.message.role": "user",
            "llm.input_messages.2.message.content": "Weather?",
            "llm.tools.0.tool": "weather",
            "llm.tools.1.tool.json_schema": json.dumps({"name": "weather"}),
        },
        {
            "llm.request.type": "chat",
            "gen_ai.prompt.0": "hi",
            "gen_ai.prompt.1.role": "user",
            "gen_ai.prompt.1.content": "Weather?",
            "llm.request.functions.0": "weather",
            "llm.request.functions.1.name": "weather",
        },
    ],
    ids=["openinference", "openllmetry"],
)
def test_a_plain_value_where_flattened_keys_nest_is_passed_over(attributes):
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert record.tool_definitions == ("weather",)
    assert any("Weather?" in (item.content or "") for item in record.items if item.kind == "message")


def test_system_instructions_and_a_legacy_span_event_prompt():
    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system_instructions": [{"type": "text", "content": "Rules."}],
            },
            events=[
                {
                    "name": "gen_ai.content.prompt",
                    "attributes": {"gen_ai.prompt": '[{"role": "user", "content": "hi"}]'},
                }
            ],
        ),
        {},
        count=fixed_tokens,
    )
    assert [(item.id, item.kind) for item in record.items][:1] == [("system:0", "system")]
    assert record.items[1].role == "user"
    assert record.moved_keys == ("gen_ai.system_instructions",)


@pytest.mark.parametrize(
    ("value", "text"),
    [(-809, "-809"), (2.5, "2.5"), (True, "true"), ({"type": "text", "content": "Rules."}, "Rules.")],
)
def test_system_instructions_sent_as_one_value_are_one_system_part(value, text):
    # Found by tests/fuzz/test_normalise.py: an integer here was iterated over, and the batch failed.
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.system_instructions": value}
    record = normalise.call_record(span(attributes), {}, count=fixed_tokens)
    assert [item.content for item in record.items if item.kind == "system"] == [text]


def test_content_from_a_details_log_event():
    details = normalise.Event(
        "gen_ai.client.inference.operation.details",
        {"gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]},
    )
    record = normalise.call_record(span({"gen_ai.operation.name": "chat"}), {}, [details], count=fixed_tokens)
    assert record.content_captured
    assert [item.role for item in record.items] == ["user"]


def test_content_from_deprecated_message_events():
    events = [
        normalise.Event("gen_ai.system.message", {}, {"content": "Rules."}),
        normalise.Event("gen_ai.user.message", {}, {"content": "hi"}),
        normalise.Event(
            "gen_ai.assistant.message",
            {},
            {
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
                ]
            },
        ),
        normalise.Event("gen_ai.tool.message", {}, {"content": "rain", "id": "c1"}),
        normalise.Event(
            "gen_ai.choice", {}, {"index": 0, "finish_reason": "stop", "message": {"content": "Rainy."}}
        ),
    ]
    record = normalise.call_record(span({"gen_ai.operation.name": "chat"}), {}, events, count=fixed_tokens)
    assert [(item.kind, item.role) for item in record.items] == [
        ("system", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_result", "tool"),
    ]


def test_a_call_without_content_keeps_its_usage_and_says_so():
    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.usage.input_tokens": 10,
                "gen_ai.provider.name": "openai",
            }
        ),
        {},
    )
    assert record.items == ()
    assert not record.content_captured
    assert record.manifest_source == "none"
    assert record.usage.prompt_total == 10
    assert "content was not captured" in record.notes[-1]


@pytest.mark.parametrize(
    ("stated", "budget"),
    [
        (128_000, {"limit": 128_000, "input": None, "reserved_output": None}),
        (0, None),
        (-5, None),
        (True, None),
        ("128000", None),  # a string is not the integer Sentry's convention gives
        (128_000.5, None),
    ],
)
def test_a_context_limit_the_instrumentation_states_is_the_calls_budget_limit(stated, budget):
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.context.window_size": stated}
    assert normalise.call_record(span(attributes), {}).budget == budget


def test_an_explicit_manifest_wins_over_derived_items():
    manifest = {
        "schema": "ctxview.manifest/1",
        "budget": {"limit": 200000, "reserved_output": 8000},
        "items": [
            {
                "id": "rule:ticket",
                "kind": "rule",
                "bucket": "system",
                "hash": digest("File under 4417."),
                "content": "File under 4417.",
                "pinned": True,
                "version": "2",
                "source": "rules.md",
            }
        ],
        "excluded": [{"id": "fact:shard", "reason": "sliding_window", "tokens": 40}],
    }
    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "ctxview.manifest": json.dumps(manifest),
                "gen_ai.input.messages": json.dumps(OTEL_MESSAGES),
            }
        ),
        {},
        count=fixed_tokens,
    )
    assert record.manifest_source == "explicit"
    assert [item.id for item in record.items] == ["rule:ticket"]
    assert record.items[0].pinned and record.items[0].tokens_estimated
    assert record.excluded[0]["reason"] == "sliding_window"
    assert record.budget == {"limit": 200000, "input": None, "reserved_output": 8000}
    assert record.manifest_error == ""


def test_a_bad_manifest_is_reported_and_the_derived_items_are_kept():
    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "ctxview.manifest": '{"schema": "ctxview.manifest/1", "items": [{"id": "x"}]}',
                "gen_ai.input.messages": json.dumps(OTEL_MESSAGES),
            }
        ),
        {},
        count=fixed_tokens,
    )
    assert record.manifest_source == "derived"
    assert record.manifest_error == "items[0].hash is required"
    assert len(record.items) == 4
    assert "ctxview.manifest" not in record.moved_keys


def test_tool_and_agent_operations():
    tool = normalise.operation_record(
        span(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "weather",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": '{"city":"Paris"}',
                "gen_ai.tool.call.result": "rain",
            }
        ),
        "tool",
    )
    assert (tool["name"], tool["call_id"], tool["arguments_bytes"], tool["result_bytes"]) == (
        "weather",
        "c1",
        16,
        4,
    )
    agent = normalise.operation_record(
        span({"gen_ai.agent.name": "support"}, name="invoke_agent support"), "agent"
    )
    assert (agent["name"], agent["arguments_bytes"]) == ("support", None)


def finish_of(attributes, scope=("s", "1")):
    row = span(attributes)
    row["scope_name"], row["scope_version"] = scope
    return normalise.call_record(row, {}).finish_reasons


TOOL_CALL_OUTPUT = json.dumps(
    [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {}}]}]
)


@pytest.mark.parametrize(
    "attributes, scope, expected",
    [
        # The provider's words in OTel's vocabulary; a word OTel has no value for is kept.
        ({"gen_ai.operation.name": "chat", "llm.finish_reason": "max_tokens"}, ("s", "1"), ("length",)),
        ({"gen_ai.operation.name": "chat", "llm.finish_reason": "pause_turn"}, ("s", "1"), ("pause_turn",)),
        # OpenAI's "stop" with tool calls (a forced tool_choice) is what it says.
        (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.response.finish_reasons": ["stop"],
                "gen_ai.output.messages": TOOL_CALL_OUTPUT,
            },
            ("s", "1"),
            ("stop",),
        ),
        # Gemini says STOP for a function call, whichever instrumentation passes it on.
        (
            {
                "gen_ai.operation.name": "generate_content",
                "gen_ai.system": "vertex_ai",
                "gen_ai.response.finish_reasons": ["STOP"],
                "gen_ai.output.messages": TOOL_CALL_OUTPUT,
            },
            ("s", "1"),
            ("tool_call",),
        ),
        # ...but a truncated answer stays truncated.
        (
            {
                "gen_ai.operation.name": "generate_content",
                "gen_ai.provider.name": "gemini",
                "gen_ai.response.finish_reasons": ["MAX_TOKENS"],
                "gen_ai.output.messages": TOOL_CALL_OUTPUT,
            },
            ("s", "1"),
            ("length",),
        ),
        # Legacy OpenLLMetry keeps them on each completion.
        (
            {"llm.request.type": "chat", "gen_ai.completion.0.finish_reason": "end_turn"},
            ("opentelemetry.instrumentation.anthropic", "0.40.0"),
            ("stop",),
        ),
        # An OpenInference Responses span: from the response object, cut short here.
        (
            {
                "openinference.span.kind": "LLM",
                "output.value": json.dumps(
                    {
                        "object": "response",
                        "status": "incomplete",
                        "incomplete_details": {"reason": "max_output_tokens"},
                    }
                ),
            },
            ("openinference.instrumentation.openai", "0.1.66"),
            ("length",),
        ),
        # A response object that is no object, or untrusted junk: no finish reason rather than a guess.
        ({"openinference.span.kind": "LLM", "output.value": "[1, 2"}, ("s", "1"), ()),
        (
            {"openinference.span.kind": "LLM", "output.value": '{"object": "response", "status": 3}'},
            ("s", "1"),
            (),
        ),
        (
            {"openinference.span.kind": "LLM", "output.value": '{"object": "response", "status": []}'},
            ("s", "1"),
            (),
        ),
        (
            {
                "openinference.span.kind": "LLM",
                "output.value": json.dumps(
                    {"object": "response", "status": "incomplete", "incomplete_details": {"reason": []}}
                ),
            },
            ("s", "1"),
            ("incomplete",),
        ),
    ],
)
def test_finish_reasons_wherever_the_family_puts_them(attributes, scope, expected):
    assert finish_of(attributes, scope) == expected


@pytest.mark.parametrize(
    "attributes, notes",
    [
        ({"gen_ai.conversation.compacted": True}, ["context edited before the model saw it: compacted"]),
        ({"gen_ai.conversation.compacted": False}, []),
        (
            {
                "openinference.span.kind": "LLM",
                "metadata": json.dumps(
                    {
                        "context_management_applied_edits": [
                            {"type": "clear_thinking_20251015", "cleared_thinking_turns": 3}
                        ]
                    }
                ),
            },
            ["context edited before the model saw it: clear_thinking_20251015 (3 thinking turns)"],
        ),
        # Junk from the trace: no type, counts that are no counts, not a list.
        (
            {
                "openinference.span.kind": "LLM",
                "metadata": json.dumps(
                    {
                        "context_management_applied_edits": [
                            {"cleared_tool_uses": 2},
                            {"type": "x", "cleared_a": "2"},
                        ]
                    }
                ),
            },
            ["context edited before the model saw it: x"],
        ),
        ({"openinference.span.kind": "LLM", "metadata": '{"context_management_applied_edits": 3}'}, []),
    ],
)
def test_context_edits_are_noted_on_the_call(attributes, notes):
    record = normalise.call_record(span({"gen_ai.operation.name": "chat", **attributes}), {})
    assert [note for note in record.notes if note.startswith("context edited")] == notes
    # ... and kept with the reported usage, where the cache analysis reads them (one per note).
    edits = limits.context_edits(record.usage.raw)
    assert [edit["type"] for edit in edits] == [note.split(": ")[1].split(" (")[0] for note in notes]


def test_a_new_call_has_every_field_of_its_record_as_the_models_keyword_constructor_sets_them():
    from ingest.call_rows import Batch, content_fields, datetime_of, new_call
    from ingest.models import Call

    record = normalise.call_record(
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.tool.definitions": json.dumps(TOOLS),
                "gen_ai.input.messages": json.dumps(OTEL_MESSAGES),
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.cache_read.input_tokens": 100,
                "gen_ai.usage.output_tokens": 7,
            }
        ),
        {},
    )
    call = new_call(Batch(3), 5, record)
    by_keywords = Call(
        project_id=3, run_id=5, trace_id=record.trace_id, span_id=record.span_id,
        parent_span_id=record.parent_span_id, turn_hint=record.turn_hint, name=record.name,
        start_ns=record.start_ns, end_ns=record.end_ns, started_at=datetime_of(record.start_ns),
        provider=record.provider, operation=record.operation, request_model=record.request_model,
        response_model=record.response_model, response_id=record.response_id, agent_name=record.agent_name,
        finish_reasons=list(record.finish_reasons), **record.usage.to_dict(), **content_fields(record),
    )  # fmt: skip
    fields = [field.attname for field in Call._meta.concrete_fields]
    assert [getattr(call, name) for name in fields] == [getattr(by_keywords, name) for name in fields]
    assert call.items == by_keywords.items and len(call.items) == 5 and call._items_changed
    assert (call.request_model, call.cache_read, call.run_id, call.seq) == ("gpt-4o", 100, 5, None)


_part = st.one_of(
    st.builds(lambda text: {"type": "text", "content": text}, st.text(max_size=20)),
    st.builds(lambda text: {"type": "tool_call_response", "id": "t", "response": text}, st.text(max_size=20)),
    st.builds(
        lambda name: {"type": "tool_call", "id": "t", "name": name, "arguments": {}}, st.text(max_size=8)
    ),
)
_message = st.builds(
    lambda role, parts: {"role": role, "parts": parts},
    st.sampled_from(["user", "assistant", "system", "developer", "tool", "User"]),
    st.lists(_part, max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.lists(_message, max_size=6)))
def test_the_user_fingerprint_is_the_hash_of_the_last_user_message_that_is_not_only_tool_results(messages):
    expected = None
    for candidate in reversed(messages or []):
        parts = candidate["parts"]
        only_results = bool(parts) and all(part["type"] == "tool_call_response" for part in parts)
        if candidate["role"] == "user" and not only_results:
            expected = digest(render(candidate))
            break
    assert normalise.user_fingerprint(normalise.derive_items(None, None, messages)) == expected
