"""Provider request payloads -> items: render order, stable ids, kinds, buckets and cache breakpoints."""

import copy

from ctxview_sdk.manifest import content_hash, message_id
from ctxview_sdk.payloads import anthropic_items, openai_items, reserved_output

SEARCH = {
    "name": "search",
    "description": "Search the repository.",
    "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
}

ANTHROPIC = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 2048,
    # Keys deliberately out of render order: items still come out tools -> system -> messages.
    "messages": [
        {"role": "user", "content": "Fix the timeout."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Searching."},
                {"type": "tool_use", "id": "tu_1", "name": "search", "input": {"query": "timeout"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_1",
                    "content": "client.py:12",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ],
    "system": [
        {"type": "text", "text": "You are a coding agent.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Today is 2026-11-30."},
    ],
    "tools": [SEARCH],
}


def summary(drafts):
    return [(d["id"], d["kind"], d["bucket"], d["role"], d["cache_breakpoint"]) for d in drafts]


def test_anthropic_items_in_render_order_with_kinds_and_buckets():
    drafts = anthropic_items(ANTHROPIC)
    result_body = '[{"type":"tool_result","tool_use_id":"tu_1","content":"client.py:12"}]'
    assert summary(drafts) == [
        ("tool:search", "tool", "tools", None, False),
        ("system:0", "system", "system", "system", True),
        ("system:1", "system", "system", "system", False),
        (message_id("user", "Fix the timeout."), "message", "conversation", "user", False),
        (drafts[4]["id"], "tool_call", "conversation", "assistant", False),
        (message_id("user", result_body), "tool_result", "tool_results", "tool", True),
    ]
    assert drafts[1]["content"] == "You are a coding agent."  # a plain text block reads as its text
    assert drafts[4]["source"] == drafts[5]["source"] == "search"
    assert drafts[5]["content"] == result_body  # cache_control is not part of what the model reads


def test_tool_content_is_its_json_in_the_callers_key_order():
    (tool,) = [d for d in anthropic_items(ANTHROPIC) if d["kind"] == "tool"]
    assert tool["content"] == (
        '{"name":"search","description":"Search the repository.",'
        '"input_schema":{"type":"object","properties":{"query":{"type":"string"}}}}'
    )
    reordered = copy.deepcopy(ANTHROPIC)
    reordered["tools"] = [
        {"input_schema": SEARCH["input_schema"], "name": "search", "description": SEARCH["description"]}
    ]
    (moved,) = [d for d in anthropic_items(reordered) if d["kind"] == "tool"]
    assert moved["id"] == tool["id"]
    assert content_hash(moved["content"]) != content_hash(tool["content"])


def test_ids_and_hashes_are_stable_when_the_conversation_grows_and_the_breakpoint_moves():
    first = anthropic_items(ANTHROPIC)
    later = copy.deepcopy(ANTHROPIC)
    del later["messages"][2]["content"][0]["cache_control"]
    later["messages"].append(
        {
            "role": "user",
            "content": [{"type": "text", "text": "Go on.", "cache_control": {"type": "ephemeral"}}],
        }
    )
    second = anthropic_items(later)
    assert [(d["id"], content_hash(d["content"])) for d in second[: len(first)]] == [
        (d["id"], content_hash(d["content"])) for d in first
    ]
    assert second[-1]["cache_breakpoint"] and not second[-2]["cache_breakpoint"]


def test_a_user_message_mixing_text_and_tool_results_is_a_message():
    request = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "x", "content": "ok"},
                    {"type": "text", "text": "and also"},
                ],
            }
        ]
    }
    (draft,) = anthropic_items(request)
    assert (draft["kind"], draft["bucket"], draft["role"]) == ("message", "conversation", "user")


def test_a_string_system_prompt_is_system_0_and_top_level_cache_control_marks_the_last_item():
    drafts = anthropic_items(
        {
            "system": "Be brief.",
            "messages": [{"role": "user", "content": "hi"}],
            "cache_control": {"type": "ephemeral"},
        }
    )
    assert [(d["id"], d["content"], d["cache_breakpoint"]) for d in drafts] == [
        ("system:0", "Be brief.", False),
        (message_id("user", "hi"), "hi", True),
    ]


def test_malformed_parts_are_skipped_not_raised():
    drafts = anthropic_items({"tools": "nope", "messages": [None, {"role": "user", "content": "ok"}, 3]})
    assert [d["content"] for d in drafts] == ["ok"]


OPENAI_CHAT = {
    "model": "gpt-5",
    "max_completion_tokens": 1000,
    "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}],
    "messages": [
        {"role": "developer", "content": "Answer in English."},
        {"role": "user", "content": [{"type": "text", "text": "What is 6*7?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":"6*7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
        {"role": "system", "content": "Be terse."},
    ],
}


def test_openai_chat_items():
    drafts = openai_items(OPENAI_CHAT)
    tool_body = '{"tool_call_id":"call_1","content":"42"}'
    assert summary(drafts) == [
        ("tool:lookup", "tool", "tools", None, False),
        ("system:0", "system", "system", "system", False),
        (
            message_id("user", '[{"type":"text","text":"What is 6*7?"}]'),
            "message",
            "conversation",
            "user",
            False,
        ),
        (drafts[3]["id"], "tool_call", "conversation", "assistant", False),
        (message_id("tool", tool_body), "tool_result", "tool_results", "tool", False),
        ("system:1", "system", "system", "system", False),
    ]
    assert drafts[1]["content"] == "Answer in English."
    assert drafts[4]["content"] == tool_body
    assert drafts[3]["source"] == drafts[4]["source"] == "lookup"
    assert reserved_output(OPENAI_CHAT) == 1000


def test_openai_responses_items():
    request = {
        "model": "gpt-5",
        "instructions": "Be helpful.",
        "tools": [{"type": "function", "name": "lookup", "parameters": {}}],
        "input": [
            {"role": "user", "content": "6*7?"},
            {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
    }
    drafts = openai_items(request)
    assert [(d["id"].split(":")[0], d["kind"], d["bucket"], d.get("source")) for d in drafts] == [
        ("tool", "tool", "tools", "lookup"),
        ("system", "system", "system", None),
        ("msg", "message", "conversation", None),
        ("msg", "tool_call", "conversation", "lookup"),
        ("msg", "tool_result", "tool_results", "lookup"),
    ]
    assert drafts[2]["id"] == message_id("user", "6*7?")


def test_reserved_output_reads_max_tokens():
    assert reserved_output(ANTHROPIC) == 2048
    assert reserved_output({"max_output_tokens": 64}) == 64
    assert reserved_output({}) is None
