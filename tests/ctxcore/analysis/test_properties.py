"""Property tests: the chained prefix equals a naive comparison, and results depend only on the sequence."""

import json
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcore.analysis import DEFAULT_CONFIG, AnalysisConfig, analyse_call, finalise_run, new_state
from ctxcore.analysis.prefix import chain, common_prefix_length, naive_common_prefix_length
from tests.ctxcore.analysis.builders import analyse, call, digest, item, json_roundtrip, message, system, tool

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
    "switch_agent",
]
AGENTS = ["triage", "billing", "refunds"]


def build_run(script: list[list[str]]) -> list:
    """Calls from a script of operations per call: history grows, gets trimmed, prompts change, etc."""
    tools = [tool("search_logs"), tool("query_metrics")]
    day, model, at, previous_total = 1, "claude-sonnet-4-5", 0.0, 0
    history: list[dict] = []
    pinned = file_version = None
    text = ""
    agent = None
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
            elif operation == "switch_agent":
                agent = AGENTS[(AGENTS.index(agent) + 1) % len(AGENTS)] if agent else AGENTS[0]
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
                agent=agent,
            )
        )
        previous_total = total
    return calls


scripts = st.lists(st.lists(st.sampled_from(OPERATIONS), max_size=3), min_size=1, max_size=14)


def one_pass(calls, state=None, config=DEFAULT_CONFIG):
    state = state or new_state()
    results, states = [], []
    for entry in calls:
        analysis, state = analyse_call(state, entry, config)
        results.append(analysis.to_dict())
        states.append(state)
    return results, states


# A small bound as well, so that agents and chains are evicted (and lanes retired) along the way.
SMALL = AnalysisConfig(recent_calls=2, agents_kept=2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts, st.sampled_from([DEFAULT_CONFIG, SMALL]))
def test_restarting_from_any_stored_state_gives_the_same_results(script, config):
    calls = build_run(script)
    results, states = one_pass(calls, config=config)
    final = finalise_run(states[-1], config)
    json.dumps(states)  # every state is JSON-serialisable

    for start in range(1, len(calls)):
        stored = json_roundtrip(states[start - 1])  # as the database gives it back
        again, again_states = one_pass(calls[start:], stored, config)
        assert again == results[start:]
        assert json_roundtrip(again_states[-1]) == json_roundtrip(states[-1])
        assert finalise_run(json_roundtrip(again_states[-1]), config) == final


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


# --- Two agents, interleaved ---------------------------------------------------------------------

BREAKS = ["none", "system", "add_tool", "drop_oldest", "read_nothing", "long_gap"]


@st.composite
def agent_script(draw):
    """One agent's calls: how many, the gap before each, and what (if anything) breaks at one of them."""
    count = draw(st.integers(min_value=1, max_value=6))
    gaps = draw(st.lists(st.sampled_from([5, 15, 40]), min_size=count, max_size=count))
    where = draw(st.integers(min_value=1, max_value=max(1, count - 1)))
    return {
        "gaps": gaps,
        "break": draw(st.sampled_from(BREAKS)),
        "at": where,
        "offset": draw(st.integers(0, 30)),
    }


def agent_calls(name: str, script: dict, shared_tools: bool) -> list[tuple[float, dict]]:
    """``(start, call fields)`` per call of one agent; reads report what the agent's own chain reuses."""
    tools = [tool("search_logs"), tool("query_metrics")] if shared_tools else [tool(f"{name}_tool", 500)]
    prompt = f"You are the {name} agent."
    history: list[dict] = []
    at, previous_total, calls = float(script["offset"]), 0, []
    for index, gap in enumerate(script["gaps"]):
        at += gap
        history.append(message(index, tokens=150 + 10 * index, text=f"{name} says {index}"))
        breaking = script["break"] if index == script["at"] else "none"
        if breaking == "system":
            prompt += " Be brief."
        elif breaking == "add_tool":
            tools = [*tools, tool(f"{name}_extra", 300)]
        elif breaking == "drop_oldest" and len(history) > 1:
            history.pop(0)
        elif breaking == "long_gap":
            at += 400
        items = [*tools, system(prompt, tokens=1200), *history]
        total = sum(entry["tokens"] for entry in items)
        changed = breaking in ("system", "add_tool", "read_nothing", "long_gap") or (
            breaking == "drop_oldest" and index > 0
        )
        read = 0 if changed or index == 0 else previous_total
        calls.append((at, {"items": items, "read": read, "agent": name}))
        previous_total = total
    return calls


def cache_view(result: dict, local: dict[int, int]) -> dict:
    """A call's cache analysis and findings, with seqs read as the agent's own call numbers."""
    cache = {key: value for key, value in result["cache"].items() if key != "calibration"}
    cache["reference_seq"] = local.get(cache["reference_seq"])
    findings = sorted(
        (entry["type"], entry["cause"] or "", entry["item_id"] or "") for entry in result["findings"]
    )
    return {"cache": cache, "findings": findings}


def analysed(timed: list[tuple[float, dict]]) -> list[dict]:
    """Analyse calls in start order, numbered 1..n; each result keyed by (agent, the agent's own number)."""
    ordered = sorted(timed, key=lambda pair: (pair[0], pair[1]["agent"]))
    calls = [
        call(seq, fields["items"], at=at, read=fields["read"], agent=fields["agent"])
        for seq, (at, fields) in enumerate(ordered, start=1)
    ]
    results, _ = analyse(calls)
    own: dict[str, int] = {}
    local: dict[int, int] = {}
    keyed = {}
    for entry, result in zip(calls, results, strict=True):
        own[entry.agent] = own.get(entry.agent, 0) + 1
        local[entry.seq] = own[entry.agent]
        keyed[(entry.agent, own[entry.agent])] = cache_view(result, local)
    return keyed


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_script(), agent_script(), st.booleans())
def test_interleaving_two_agents_finds_exactly_the_breaks_each_has_alone(first, second, shared_tools):
    triage = agent_calls("triage", first, shared_tools)
    billing = agent_calls("billing", second, shared_tools)

    together = analysed([*triage, *billing])
    alone = {**analysed(triage), **analysed(billing)}

    assert together == alone
    breaks = {key for key, view in alone.items() if view["cache"]["broke"]}
    assert breaks == {key for key, view in together.items() if view["cache"]["broke"]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts)
def test_a_run_of_one_named_agent_is_analysed_as_a_run_without_agents(script):
    plain = [replace(entry, agent=None) for entry in build_run(script)]
    named = [replace(entry, agent="solo") for entry in plain]
    results, states = one_pass(plain)
    named_results, named_states = one_pass(named)

    assert named_results == results  # call by call, the agent changes nothing
    run, named_run = finalise_run(states[-1]), finalise_run(named_states[-1])
    assert named_run["accounting"] == run["accounting"]
    assert [{**entry, "evidence": {**entry["evidence"], "agent": "solo"}} for entry in run["findings"]] == (
        named_run["findings"]
    )


def invocation_calls(name: str, scripts: list[dict], shared_tools: bool) -> list[tuple[float, dict]]:
    """One agent's nested invocations, one after the other (each a fresh conversation of the same agent:
    same instructions and tools, its own history), each call tagged with its invocation."""
    timed, start = [], 0.0
    for number, script in enumerate(scripts, start=1):
        calls = agent_calls(name, {**script, "offset": start + script["offset"]}, shared_tools)
        timed += [(at, {**fields, "invocation": f"{name}-{number}"}) for at, fields in calls]
        start = calls[-1][0] + 1
    return timed


def analysed_invocations(timed: list[tuple[float, dict]]) -> dict:
    """As ``analysed``, each result keyed by (invocation, the invocation's own call number)."""
    ordered = sorted(timed, key=lambda pair: (pair[0], pair[1]["invocation"]))
    calls = [
        call(
            seq,
            fields["items"],
            at=at,
            read=fields["read"],
            agent=fields["agent"],
            invocation=fields["invocation"],
        )
        for seq, (at, fields) in enumerate(ordered, start=1)
    ]
    results, _ = analyse(calls)
    own: dict[str, int] = {}
    local: dict[int, int] = {}
    keyed = {}
    for entry, result in zip(calls, results, strict=True):
        own[entry.invocation] = own.get(entry.invocation, 0) + 1
        local[entry.seq] = own[entry.invocation]
        keyed[(entry.invocation, own[entry.invocation])] = cache_view(result, local)
    return keyed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(agent_script(), min_size=1, max_size=3),
    st.lists(agent_script(), min_size=1, max_size=3),
    st.booleans(),
)
def test_interleaved_invocations_find_exactly_the_breaks_each_invocation_has_alone(
    first, second, shared_tools
):
    """A sub-agent run again (a new invocation of the same agent: same prompt and tools, a new history)
    starts its own chain: never a break against its earlier invocation, nor against the other agent."""
    researcher = invocation_calls("researcher", first, shared_tools)
    writer = invocation_calls("writer", second, shared_tools)
    invocations: dict[str, list] = {}
    for at, fields in [*researcher, *writer]:
        invocations.setdefault(fields["invocation"], []).append((at, fields))

    together = analysed_invocations([*researcher, *writer])
    alone = {key: view for timed in invocations.values() for key, view in analysed_invocations(timed).items()}

    assert together == alone
    breaks = {key for key, view in alone.items() if view["cache"]["broke"]}
    assert breaks == {key for key, view in together.items() if view["cache"]["broke"]}
