"""Re-ask without I/O: phrasings, scoring, the conversation a window makes, requests and answers."""

import json
import re

import pytest

from ctxcore.replay.policies import REPLAY_SOURCE, Slot
from ctxcore.replay.reask import (
    MAX_PHRASING,
    ReaskError,
    answer_text,
    conversation,
    phrasings,
    request,
    score,
    tally,
)
from ctxcore.vocabulary import Item

SHARD = re.compile("pay-shard-7", re.IGNORECASE)


def item(item_id: str, role: str | None, bucket: str = "conversation", **fields) -> Item:
    return Item(
        id=item_id, kind="message", bucket=bucket, hash=f"h-{item_id}", role=role, position=0, **fields
    )


def test_phrasings_split_on_bars_and_repeated_values():
    assert phrasings(["Which shard? | What shard failed?", "Name the shard"]) == [
        "Which shard?",
        "What shard failed?",
        "Name the shard",
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([" | "], "at least one phrasing"),
        (["a|b|c|d|e|f"], "at most 5"),
        (["x" * (MAX_PHRASING + 1)], f"longer than {MAX_PHRASING}"),
        (["a\x00b"], "NUL"),
    ],
)
def test_phrasings_are_bounded(values, message):
    with pytest.raises(ReaskError, match=message):
        phrasings(values)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("The affected shard is PAY-SHARD-7.", "right"),
        ("I'm not sure, but maybe pay-shard-7", "right"),
        ("I don\u2019t know which shard it was.", "unknown"),
        ("That information is NOT mentioned in the conversation.", "unknown"),
        ("The affected shard is pay-shard-3.", "wrong"),
        ("", "wrong"),
        ("Shards are unknowable", "wrong"),  # "unknown" as a word, not inside another
    ],
)
def test_score(answer, expected):
    assert score(answer, SHARD) == expected


def test_tally_counts_every_score_including_zeros():
    assert tally(["right", "unknown", "right"]) == {"right": 2, "wrong": 0, "unknown": 1}
    assert tally([]) == {"right": 0, "wrong": 0, "unknown": 0}


def test_conversation_is_the_windows_content_in_order_with_system_items_as_the_system_prompt():
    window = [
        Slot(item("sys", "system", bucket="system")),
        Slot(item("u1", "user")),
        Slot(item("a1", "assistant")),
        Slot(item("t1", "tool", bucket="tool_results")),
        Slot(item("rule", None, bucket="system")),
    ]
    contents = {f"h-{name}": f"text of {name} <b>é</b>" for name in ("sys", "u1", "a1", "t1", "rule")}
    system, messages = conversation(window, contents)
    assert system == "text of sys <b>é</b>\n\ntext of rule <b>é</b>"
    assert messages == [
        {"role": "user", "content": "text of u1 <b>é</b>"},
        {"role": "assistant", "content": "text of a1 <b>é</b>"},
        {"role": "user", "content": "text of t1 <b>é</b>"},
    ]


def test_a_stub_a_replay_made_is_sent_as_its_own_text():
    stub = item("t1", "tool", source=REPLAY_SOURCE, content="[tool_result t1 elided: 900 tokens]")
    _, messages = conversation([Slot(stub, replaces=(item("t1", "tool"),))], {})
    assert messages == [{"role": "user", "content": "[tool_result t1 elided: 900 tokens]"}]


def test_content_not_kept_or_an_unknown_summary_makes_the_window_unavailable():
    with pytest.raises(ReaskError, match="content of u1 was not kept"):
        conversation([Slot(item("u1", "user"))], {})
    summary = Slot(item("sum", "user", source=REPLAY_SOURCE, content=None), known=False)
    with pytest.raises(ReaskError, match="summary"):
        conversation([summary], {})


def test_anthropic_request():
    url, headers, body = request(
        "anthropic",
        "http://fake/",
        "claude-x",
        "sk-1",
        "be careful",
        [{"role": "user", "content": "hi"}],
        "Q?",
    )
    assert url == "http://fake/v1/messages"
    assert headers["x-api-key"] == "sk-1" and headers["anthropic-version"] == "2023-06-01"
    sent = json.loads(body)
    assert sent["system"] == "be careful" and sent["model"] == "claude-x"
    assert sent["messages"] == [{"role": "user", "content": "hi"}, {"role": "user", "content": "Q?"}]


def test_openai_request_puts_the_system_prompt_first():
    url, headers, body = request("openai", "http://fake/v1", "gpt-x", "sk-2", "sys", [], "Q?")
    assert url == "http://fake/v1/chat/completions" and headers["authorization"] == "Bearer sk-2"
    assert json.loads(body)["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "Q?"},
    ]


def test_answer_text_reads_each_providers_format_and_refuses_others():
    anthropic = {"content": [{"type": "text", "text": "pay-"}, {"type": "text", "text": "shard-7"}]}
    assert answer_text("anthropic", anthropic) == "pay-shard-7"
    assert answer_text("openai", {"choices": [{"message": {"content": "ok"}}]}) == "ok"
    for provider, payload in (("anthropic", {"error": "x"}), ("openai", {"choices": []}), ("openai", [1])):
        with pytest.raises(ReaskError, match="not in the provider's format"):
            answer_text(provider, payload)
