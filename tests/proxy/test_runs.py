"""Which run a call without a run header belongs to: the key, the client, time and the shared-prefix chain.

Pure tests of ``ctxview.proxy.runs`` (no proxy, no Django), then one through the proxy with the anthropic
SDK: two conversations interleaved from the same key and client are two runs.
"""

import json

import anthropic

from ctxview.proxy.runs import RUN_GAP_S, RUN_ID, RUN_RULE, Runs, window_of
from tests.instrumented.fake_providers import anthropic_reply, anthropic_usage
from tests.proxy.conftest import PROVIDER_KEY

CLIENT = {"user-agent": "my-agent/1.0"}
SYSTEM = [{"type": "text", "content": "You are a careful coding agent."}]
TOOLS = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(text: str) -> dict:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def window(messages: list[dict], system: list[dict] = SYSTEM, **ids: str):
    return window_of(json.dumps(system), json.dumps(TOOLS), json.dumps(messages), **ids)


def run_of(runs: Runs, messages: list[dict], at: float, headers: dict = CLIENT, **kwargs) -> str:
    return runs.attributes(headers, "keyhash", "anthropic", at, window(messages, **kwargs))[RUN_ID]


def test_two_interleaved_conversations_are_two_runs():
    runs = Runs()
    a, b = [user("fix the parser")], [user("write the docs")]
    seen_a, seen_b = [], []
    for step in range(4):
        seen_a.append(run_of(runs, a, 100 + 2 * step))
        seen_b.append(run_of(runs, b, 101 + 2 * step))
        a = a + [assistant(f"a{step}"), user(f"tool result a{step}")]
        b = b + [assistant(f"b{step}"), user(f"tool result b{step}")]
    assert len(set(seen_a)) == 1 and len(set(seen_b)) == 1
    assert seen_a[0] != seen_b[0]


def test_a_conversation_continues_after_another_ones_call():
    runs = Runs()
    first = run_of(runs, [user("fix the parser")], 100)
    other = run_of(runs, [user("summarise this file")], 101)
    later = run_of(runs, [user("fix the parser"), assistant("done"), user("now the tests")], 102)
    assert later == first != other


def test_a_retried_or_edited_turn_stays_in_its_conversation():
    runs = Runs()
    history = [user("fix the parser"), assistant("which one?"), user("the json one")]
    first = run_of(runs, history, 100)
    run_of(runs, [user("another task")], 101)
    edited = run_of(runs, history[:2] + [user("the csv one, sorry")], 102)
    assert edited == first


def test_the_same_system_prompt_with_another_first_message_starts_a_new_run():
    runs = Runs()
    first = run_of(runs, [user("fix the parser")], 100)
    second = run_of(runs, [user("fix the lexer")], 101)
    assert first != second


def test_a_system_prompt_that_changes_between_calls_stays_in_its_run_where_the_break_shows():
    runs = Runs()
    history = [user("fix the parser")]
    first = run_of(runs, history, 100, system=[{"type": "text", "content": "Today is Monday 10:00."}])
    run_of(runs, [user("write the docs")], 101)
    later = history + [assistant("ok"), user("more")]
    assert run_of(runs, later, 102, system=[{"type": "text", "content": "Today is Monday 10:02."}]) == first


def test_the_gap_still_ends_a_run():
    runs = Runs()
    first = run_of(runs, [user("fix the parser")], 100)
    later = run_of(runs, [user("fix the parser"), assistant("ok"), user("more")], 100 + RUN_GAP_S + 1)
    assert first != later


def test_a_run_header_still_wins():
    runs = Runs()
    first = run_of(runs, [user("fix the parser")], 100)
    named = runs.attributes(
        CLIENT | {"x-ctxview-run": "nightly"}, "keyhash", "anthropic", 101, window([user("fix the parser")])
    )
    assert (named[RUN_ID], named[RUN_RULE]) == ("nightly", "header")
    assert run_of(runs, [user("fix the parser"), assistant("ok"), user("more")], 102) == first


def test_only_calls_without_a_run_or_session_header_need_their_window():
    runs = Runs()
    assert runs.chains(CLIENT)
    assert not runs.chains(CLIENT | {"x-ctxview-run": "nightly"})
    assert not runs.chains(CLIENT | {"session_id": "codex-1"})


def test_a_responses_call_follows_its_previous_response_id():
    runs = Runs()
    first = run_of(runs, [user("fix the parser")], 100, response_id="resp_a")
    run_of(runs, [user("write the docs")], 101, response_id="resp_b")
    follow = run_of(runs, [user("now the tests")], 102, previous_response_id="resp_a")
    assert follow == first


def test_the_number_of_open_conversations_is_bounded():
    runs = Runs(max_open=4)
    names = [run_of(runs, [user(f"task {n}")], 100 + n) for n in range(10)]
    assert len(set(names)) == 10
    assert runs.open_conversations("keyhash", CLIENT["user-agent"], "anthropic") == 4
    # The most recent ones are kept; the first one was dropped, so continuing it starts a new run.
    assert run_of(runs, [user("task 9"), assistant("ok"), user("more")], 120) == names[9]
    assert run_of(runs, [user("task 0"), assistant("ok"), user("more")], 121) != names[0]


def test_a_long_conversation_keeps_only_a_few_digests():
    runs = Runs()
    history = [user("start")]
    for n in range(500):
        history += [assistant(f"step {n}"), user(f"result {n}")]
    run_of(runs, history, 100)
    (conversation,) = runs._groups[("keyhash", CLIENT["user-agent"], "anthropic")]
    assert len(conversation.checkpoints) <= 12


def test_a_call_without_a_readable_request_joins_the_latest_conversation():
    runs = Runs()
    run_of(runs, [user("fix the parser")], 100)
    latest = run_of(runs, [user("write the docs")], 101)
    attributes = runs.attributes(CLIENT, "keyhash", "anthropic", 102, None)
    assert (attributes[RUN_ID], attributes[RUN_RULE]) == (latest, "key_client_gap")


def test_two_interleaved_sdk_conversations_through_the_proxy_are_two_runs(fake, proxy, recorder):
    for number in range(4):
        fake.enqueue(
            anthropic_reply(id=f"msg_{number}", model="m", text=f"ok {number}", usage=anthropic_usage(3, 2))
        )
    client = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    system = "You are a careful coding agent."
    a = [{"role": "user", "content": "fix the parser"}]
    b = [{"role": "user", "content": "write the docs"}]
    for history in (a, b):
        reply = client.messages.create(model="m", max_tokens=64, system=system, messages=history)
        history += [
            {"role": "assistant", "content": reply.content[0].text},
            {"role": "user", "content": "go on"},
        ]
    for history in (a, b):
        client.messages.create(model="m", max_tokens=64, system=system, messages=history)

    assert proxy.settled() and recorder.flush(10)
    spans = [span for _name, span in recorder.spool.oldest(1000)]
    by_first_message = {}
    for span in spans:
        first = json.loads(span["attributes"]["gen_ai.input.messages"])[0]["parts"][0]["content"]
        by_first_message.setdefault(first, set()).add(span["attributes"][RUN_ID])
    assert len(spans) == 4
    assert {k: len(v) for k, v in by_first_message.items()} == {"fix the parser": 1, "write the docs": 1}
    assert by_first_message["fix the parser"] != by_first_message["write the docs"]
    assert {span["attributes"][RUN_RULE] for span in spans} == {"key_client_prefix"}
