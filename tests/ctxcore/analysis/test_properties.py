"""Property tests: the chained prefix equals a naive comparison, and results depend only on the sequence."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcore.analysis import analyse_call, finalise_run, new_state
from ctxcore.analysis.prefix import chain, common_prefix_length, naive_common_prefix_length
from tests.ctxcore.analysis.builders import call, digest, item, json_roundtrip, message, system, tool

letters = st.lists(st.sampled_from("abc"), max_size=30)


@given(letters, letters, letters)
def test_the_chained_common_prefix_equals_an_item_by_item_comparison(shared, tail_a, tail_b):
    hashes_a, hashes_b = shared + tail_a, shared + tail_b
    assert common_prefix_length(chain(hashes_a), chain(hashes_b)) == naive_common_prefix_length(
        hashes_a, hashes_b
    )


@given(letters)
def test_a_chain_equals_itself_whole(hashes):
    assert common_prefix_length(chain(hashes), chain(list(hashes))) == len(hashes)


# --- Generated runs ------------------------------------------------------------------------------

OPERATIONS = [
    "append",
    "tool_result",
    "drop_oldest",
    "compact",
    "date_in_system",
    "add_tool",
    "swap_tools",
    "switch_model",
    "long_gap",
    "pin",
    "unpin",
    "file_v1",
    "file_v2",
    "both_files",
    "read_nothing",
    "unknown_usage",
    "call_unknown_tool",
    "budget",
]


def build_run(script: list[list[str]]) -> list:
    """Calls from a script of operations per call: history grows, gets trimmed, prompts change, etc."""
    tools = [tool("search_logs"), tool("query_metrics")]
    day, model, at, previous_total = 1, "claude-sonnet-4-5", 0.0, 0
    history: list[dict] = []
    pinned = file_version = None
    text = ""
    calls = []
    for seq, operations in enumerate(script, start=1):
        history.append(message(seq, tokens=150 + 10 * seq))
        at += 20
        for operation in operations:
            if operation == "tool_result":
                history.append(item(f"r{seq}", "tool_results", 400))
            elif operation == "drop_oldest" and len(history) > 1:
                history.pop(0)
            elif operation == "compact" and len(history) > 2:
                history = [item(f"summary{seq}", "summary", 100, mode="summary"), history[-1]]
            elif operation == "date_in_system":
                day += 1
            elif operation == "add_tool":
                tools = [*tools, tool(f"extra{seq}", 300)]
            elif operation == "swap_tools":
                tools = tools[::-1]
            elif operation == "switch_model":
                model = "claude-haiku-4-5" if model == "claude-sonnet-4-5" else "claude-sonnet-4-5"
            elif operation == "long_gap":
                at += 400
            elif operation == "pin":
                pinned = item("rule", "memory", 50, kind="rule", pinned=True)
            elif operation == "unpin":
                pinned = None
            elif operation in ("file_v1", "file_v2", "both_files"):
                file_version = operation
        previous_text = text if seq > 1 else ""
        text = f"Today is 2026-11-{day:02d}. You are the on-call assistant."
        items = [*tools, system(text, tokens=1200)]
        if pinned:
            items.append(pinned)
        if file_version in ("file_v1", "both_files"):
            items.append(item("file-a", "retrieved", 300, "a1", source="a.py", version="1"))
        if file_version in ("file_v2", "both_files"):
            items.append(item("file-b", "retrieved", 300, "a2", source="a.py", version="2"))
        items += history
        total = sum(entry["tokens"] for entry in items)
        read = 0 if "read_nothing" in operations else min(previous_total, total)
        calls.append(
            call(
                seq,
                items,
                at=at,
                model=model,
                read=read,
                prompt_total=None if "unknown_usage" in operations else total,
                contents={digest(text): text, digest(previous_text): previous_text},
                tool_calls=[{"name": "read_log", "id": f"c{seq}"}]
                if "call_unknown_tool" in operations
                else [],
                tool_definitions=[entry["id"][5:] for entry in tools],
                budget={"limit": 4000, "input": None, "reserved_output": 500}
                if "budget" in operations
                else None,
            )
        )
        previous_total = total
    return calls


scripts = st.lists(st.lists(st.sampled_from(OPERATIONS), max_size=3), min_size=1, max_size=14)


def one_pass(calls, state=None):
    state = state or new_state()
    results, states = [], []
    for entry in calls:
        analysis, state = analyse_call(state, entry)
        results.append(analysis.to_dict())
        states.append(state)
    return results, states


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts)
def test_restarting_from_any_stored_state_gives_the_same_results(script):
    calls = build_run(script)
    results, states = one_pass(calls)
    final = finalise_run(states[-1])
    json.dumps(states)  # every state is JSON-serialisable

    for start in range(1, len(calls)):
        stored = json_roundtrip(states[start - 1])  # as the database gives it back
        again, again_states = one_pass(calls[start:], stored)
        assert again == results[start:]
        assert json_roundtrip(again_states[-1]) == json_roundtrip(states[-1])
        assert finalise_run(json_roundtrip(again_states[-1])) == final


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts, st.randoms(use_true_random=False))
def test_arrival_order_does_not_change_the_end_results(script, random):
    calls = build_run(script)
    expected, expected_states = one_pass(calls)

    # The database layer: one stored (analysis, state) per call; a call that arrives late makes it
    # re-analyse from the state stored before it.
    arrived: list = []
    stored: dict[int, tuple[dict, dict]] = {}
    for late in random.sample(calls, len(calls)):
        arrived = sorted([*arrived, late], key=lambda entry: entry.seq)
        position = arrived.index(late)
        state = json_roundtrip(stored[arrived[position - 1].seq][1]) if position else new_state()
        for entry in arrived[position:]:
            analysis, state = analyse_call(state, entry)
            stored[entry.seq] = (analysis.to_dict(), json_roundtrip(state))

    assert [stored[entry.seq][0] for entry in calls] == expected
    assert stored[calls[-1].seq][1] == json_roundtrip(expected_states[-1])
