"""The rules for rebuilding a continued request's window (ingest.continuations), and the family hooks that
feed them: no database."""

import json

from ingest import continuations
from ingest.continuations import Answered, Request, Window
from ingest.families import openinference, otel_genai
from ingest.normalise import derive_items


def _count(content_hash: str, text: str) -> int:
    return 1


def text(role: str, content: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def items(*messages: dict, system: str | None = None, tools: list[dict] | None = None):
    return tuple(
        derive_items(tools, [{"type": "text", "content": system}] if system else None, messages, _count)
    )


def ids(found) -> list[str]:
    return [item.id for item in found]


TOOL = {"name": "weather", "parameters": {"type": "object"}}


def test_a_rebuilt_window_is_the_one_a_full_request_would_derive():
    """Own tools and instructions, the continued conversation, its answer, the new items: the same ids,
    positions and repeat marks that deriving the whole conversation at once gives."""
    asked, answer, again = text("user", "Hi"), text("assistant", "Hello"), text("user", "Hi")
    continued = items(asked, system="Be brief.", tools=[TOOL])
    own = items(again, system="Be brief.", tools=[TOOL])
    rebuilt = continuations.rebuilt_items(own, continued, items(answer))
    whole = items(asked, answer, again, system="Be brief.", tools=[TOOL])
    assert [(item.id, item.position, item.hash) for item in rebuilt] == [
        (item.id, item.position, item.hash) for item in whole
    ]
    assert ids(rebuilt)[-1].endswith("#2")  # the repeated "Hi", marked as derive_items marks it


def test_the_continued_calls_instructions_are_not_carried_over():
    continued = items(text("system", "Old rules."), text("user", "Q1"))
    own = items(text("system", "New rules."), text("user", "Q2"))
    rebuilt = continuations.rebuilt_items(own, continued, items(text("assistant", "A1")))
    assert [item.content for item in rebuilt] == [
        json.dumps(message, separators=(",", ":"))
        for message in (
            text("system", "New rules."),
            text("user", "Q1"),
            text("assistant", "A1"),
            text("user", "Q2"),
        )
    ]


def request(name: str, continues: str = "", answer: str | None = None) -> Request:
    """A request asking ``name``, answered as response ``resp_<name>``."""
    return Request(
        key=name,
        span_id=f"span_{name}",
        items=items(text("user", name)),
        continues=continues,
        response_id=f"resp_{name}",
        answer=items(text("assistant", answer or f"answer {name}")),
    )


def contents(window: Window) -> list[str]:
    return [json.loads(item.content)["parts"][0]["content"] for item in window.items]


def test_a_chain_is_rebuilt_whatever_order_its_requests_come_in():
    first, second, third = request("a"), request("b", "resp_a"), request("c", "resp_b")
    for order in ([first, second, third], [third, second, first], [second, third, first]):
        windows = continuations.windows(order, {})
        assert set(windows) == {"b", "c"}
        assert contents(windows["c"]) == ["a", "answer a", "b", "answer b", "c"]
        assert windows["c"].rebuilt_from == "span_b"
        assert windows["c"].gap == ""


def test_a_stored_call_answers_what_no_request_here_does():
    stored = {"resp_a": Answered("span_a", items(text("user", "a")), items(text("assistant", "stored")), "")}
    windows = continuations.windows([request("b", "resp_a")], stored)
    assert contents(windows["b"]) == ["a", "stored", "b"]
    assert windows["b"].rebuilt_from == "span_a"


def test_a_chain_missing_a_response_keeps_what_each_request_sent_and_names_the_missing_one():
    second, third = request("b", "resp_a"), request("c", "resp_b")
    windows = continuations.windows([third, second], {})
    assert (contents(windows["b"]), windows["b"].gap, windows["b"].rebuilt_from) == (["b"], "resp_a", "")
    # Its own continued call came, but not the whole chain: not rebuilt, waiting for the same response.
    assert (contents(windows["c"]), windows["c"].gap, windows["c"].rebuilt_from) == (["c"], "resp_a", "")
    stored_gap = {"resp_b": Answered("span_b", items(text("user", "b")), (), "resp_a")}
    assert continuations.windows([third], stored_gap)["c"] == Window(third.items, gap="resp_a")


def test_requests_continuing_each_other_in_a_circle_end():
    first, second = request("a", "resp_b"), request("b", "resp_a")
    windows = continuations.windows([first, second], {})
    assert {key: window.rebuilt_from for key, window in windows.items()} == {"a": "", "b": ""}
    alone = request("a", "resp_a")
    assert continuations.windows([alone], {})["a"].gap == "resp_a"


def test_the_continuation_note_is_replaced_and_the_other_notes_kept():
    notes = ["usage: cached tokens estimated", continuations.not_rebuilt_note("previous response", "resp_1")]
    rebuilt = continuations.rebuilt_note("resp_1", "00f1")
    assert continuations.with_note(notes, rebuilt) == ["usage: cached tokens estimated", rebuilt]
    assert "rebuilt from the call that answered it (span 00f1)" in rebuilt


def test_an_answer_is_kept_as_a_later_request_sends_it_back():
    outputs = [{"role": "assistant", "parts": [{"type": "text", "content": "Hi"}], "finish_reason": "stop"}]
    assert continuations.answer_messages(outputs) == [text("assistant", "Hi")]
    assert continuations.answer_messages(None) == []


def test_openinference_reads_the_response_id_from_the_response_object_only():
    response = json.dumps({"id": "resp_1", "object": "response", "output": []})
    assert openinference.response_id({openinference.OUTPUT_VALUE: response}) == "resp_1"
    for value in (
        "resp_1",  # a plain answer, not a response object
        json.dumps(["resp_1"]),
        json.dumps({"id": 1}),
        json.dumps({"id": "  "}),
        json.dumps({"id": "x" * 201}),
        json.dumps({"id": "resp_1", "text": "x" * openinference.MAX_RESPONSE_JSON}),
        "{not json",
        None,
    ):
        assert openinference.response_id({openinference.OUTPUT_VALUE: value}) is None


def test_the_proxys_previous_response_id_says_what_a_request_continues():
    attributes = {otel_genai.OPENAI_PREVIOUS_RESPONSE: "resp_1"}
    assert otel_genai.continues(attributes) == ("previous response", "resp_1")
    assert otel_genai.continues({}) is None
