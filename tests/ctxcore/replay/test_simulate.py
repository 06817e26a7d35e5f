"""The replay: windows rebuilt from the pool, the cache model over them, prices and probes."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxcore.analysis import analyse_call, new_state
from ctxcore.analysis.cache import INVISIBLE
from ctxcore.replay import Probe, TooMuchWork, cheapest_keeping_all, parse, parse_list, replay, replay_cost
from tests.ctxcore.analysis.builders import call, item, system, tool


def _conversation(turns: int, window: int | None = None, gap_before: int | None = None):
    """A run that appends a user message and an answer per turn, keeping the last ``window`` of them."""
    head = [tool("search"), system(tokens=1500)]
    history: list[dict] = []
    calls = []
    at = 0.0
    for turn in range(1, turns + 1):
        history += [
            item(f"u{turn}", tokens=300, role="user", origin_turn=turn),
            item(f"a{turn}", tokens=400, role="assistant", origin_turn=turn),
        ]
        if turn == 3:
            history.append(item("fact:shard", tokens=50, kind="fact", role="user", origin_turn=3))
        kept = history[-window:] if window else history
        dropped = [entry for entry in history if entry not in kept]
        at += 600.0 if turn == gap_before else 30.0
        calls.append(
            call(
                turn,
                [*head, *kept],
                at=at,
                excluded=[{"id": entry["id"], "reason": "sliding_window"} for entry in dropped],
            )
        )
    return calls


def _by_policy(result):
    return {entry["policy"]: entry for entry in result["policies"]}


def test_the_sliding_window_breaks_the_cache_every_call_and_append_only_history_never():
    calls = _conversation(10)
    result = _by_policy(replay(calls, parse_list("full,sliding_window:4")))
    assert result["full"]["cache_breaks"] == 0
    sliding = result["sliding_window:4"]
    assert sliding["breaks_by_cause"] == {"history_rewritten:removed": sliding["cache_breaks"]}
    assert sliding["cache_breaks"] == sum(1 for entry in sliding["per_call"] if entry["broke"]) >= 7
    assert sliding["billed_input"] < result["full"]["billed_input"]


def test_every_policy_loses_the_cache_after_a_long_break():
    calls = _conversation(6, gap_before=4)
    for entry in replay(calls, parse_list("full,user_verbatim:1"))["policies"]:
        assert entry["per_call"][3]["cause"] == "ttl_expired"
        assert entry["per_call"][3]["cache_read"] == 0


def test_output_tokens_are_the_recorded_ones_and_figures_add_up():
    calls = _conversation(5)
    for entry in replay(calls, parse_list("recorded,full,sliding_window:2"))["policies"]:
        assert entry["output"] == sum(recorded.usage.output for recorded in calls)
        assert entry["uncached"] + entry["cache_write"] + entry["cache_read"] == entry["billed_input"]
        assert entry["peak_window"] == max(row["window"] for row in entry["per_call"])
        # Rounded per call for display, summed unrounded: they agree to a cent's fraction.
        assert abs(entry["cost_usd"] - sum(row["cost_usd"] for row in entry["per_call"])) < 1e-5


def test_an_unpriced_model_has_no_cost():
    calls = [call(1, [system()], model="in-house-model"), call(2, [system()], model="in-house-model")]
    [entry] = replay(calls, [parse("full")])["policies"]
    assert (entry["cost_usd"], entry["unpriced_calls"]) == (None, 2)


def test_a_recorded_probe_leaves_at_the_call_that_excluded_it_with_its_reason():
    calls = _conversation(10, window=6)
    result = _by_policy(replay(calls, parse_list("recorded,full"), [Probe("item", "fact:shard")]))
    [recorded] = result["recorded"]["probes"]
    left = next(entry.seq for entry in calls[3:] if "fact:shard" not in {item.id for item in entry.items})
    assert recorded == {
        "probe": "fact:shard",
        "kind": "item",
        "present": False,
        "how": "absent",
        "item_id": None,
        "position_share": None,
        "left_at_call": left,
        "left_reason": "sliding_window",
    }
    [full] = result["full"]["probes"]
    assert (full["present"], full["how"], full["left_at_call"]) == (True, "verbatim", None)


def test_the_query_turn_decides_where_probes_are_read():
    calls = _conversation(10, window=6)
    early = replay(calls, parse_list("recorded"), [Probe("item", "fact:shard")], at_turn=4)
    assert (early["at_turn"], early["query_seq"]) == (4, 4)
    assert early["policies"][0]["probes"][0]["present"] is True
    assert early["policies"][0]["calls"] == 10  # the totals are the whole run's


def test_text_probes_use_the_hits_and_say_unknown_without_content():
    calls = _conversation(4)
    fact_hash = next(entry.hash for entry in calls[-1].items if entry.id == "fact:shard")
    probes = [Probe("text", "pay-shard-7"), Probe("text", "no content")]
    result = replay(calls, [parse("full")], probes, {"pay-shard-7": {fact_hash}, "no content": None})
    found, unknown = result["policies"][0]["probes"]
    assert (found["how"], found["item_id"]) == ("verbatim", "fact:shard")
    assert (unknown["how"], unknown["present"]) == ("unknown", None)


def test_the_cheapest_policy_keeping_every_probe_is_chosen():
    results = [
        {"policy": "full", "cost_usd": 2.0, "billed_input": 9, "probes": [{"present": True}]},
        {"policy": "cheap", "cost_usd": 0.5, "billed_input": 3, "probes": [{"present": False}]},
        {"policy": "both", "cost_usd": 1.0, "billed_input": 5, "probes": [{"present": True}]},
    ]
    assert cheapest_keeping_all(results) == "both"
    assert cheapest_keeping_all([{**results[1]}]) is None


def test_replayed_windows_are_returned_for_the_calls_asked():
    calls = _conversation(4)
    [entry] = replay(calls, [parse("sliding_window:2")], keep_windows={4})["policies"]
    assert [slot.item.id for slot in entry["windows"][4]] == ["tool:search", "system:0", "u4", "a4"]


def test_a_replay_past_its_item_budget_stops_and_says_where():
    calls = _conversation(10)
    # Appending to the history rebuilds only what was appended; a policy of two steps rebuilds it all.
    assert replay(calls, [parse("full")], max_items=60)["policies"][0]["calls"] == 10
    with pytest.raises(TooMuchWork, match="more than 60 window items .* policy full\\+elide:2"):
        replay(calls, [parse("full+elide:2")], max_items=60)


# --- Properties ---------------------------------------------------------------------------------

ops = st.lists(
    st.tuples(
        st.integers(0, 3),  # messages added
        st.integers(0, 2),  # oldest messages dropped
        st.sampled_from([20.0, 20.0, 400.0]),  # seconds since the previous call
        st.booleans(),  # the call asked for caching
        st.integers(1, 2),  # calls in the turn
    ),
    min_size=1,
    max_size=12,
)


def _generated(operations):
    history: list[dict] = []
    calls, at, number, seq = [], 0.0, 0, 0
    for turn, (added, dropped, gap, cached, per_turn) in enumerate(operations, start=1):
        for _ in range(added):
            number += 1
            kind = "fact" if number % 5 == 0 else "message"
            history.append(item(f"m{number}", tokens=150 + 37 * number, kind=kind, origin_turn=turn))
        history = history[dropped:]
        for _ in range(per_turn):
            seq += 1
            at += gap
            items = [system(tokens=1200), *history]
            total = sum(entry["tokens"] for entry in items)
            calls.append(call(seq, items, at=at, turn=turn, write=total if cached else 0))
    return calls


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_replaying_recorded_gives_the_recorded_analysis(operations):
    calls = _generated(operations)
    [entry] = replay(calls, [parse("recorded")])["policies"]
    state = new_state()
    for recorded, replayed in zip(calls, entry["per_call"], strict=True):
        analysis, state = analyse_call(state, recorded)
        cache = analysis.cache
        assert replayed["window"] == recorded.usage.prompt_total
        assert replayed["cache_read"] == cache["expected_read"]
        if cache["cause"] != INVISIBLE:
            assert (replayed["broke"], replayed["cause"]) == (
                cache["broke"],
                cache["cause"] if cache["broke"] else None,
            )
    assert entry["billed_input"] == sum(recorded.usage.prompt_total for recorded in calls)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_full_never_loses_a_probe(operations):
    calls = _generated(operations)
    ids = list(dict.fromkeys(entry.id for recorded in calls for entry in recorded.items))
    [entry] = replay(calls, [parse("full")], [Probe("item", item_id) for item_id in ids])["policies"]
    assert all(probe["how"] == "verbatim" for probe in entry["probes"])


@settings(max_examples=60, deadline=None)
@given(ops)
def test_billed_input_of_last_turns_grows_with_k(operations):
    calls = _generated(operations)
    billed = [
        entry["billed_input"]
        for entry in replay(calls, parse_list("last_turns:1,last_turns:2,last_turns:4,last_turns:9"))[
            "policies"
        ]
    ]
    assert billed == sorted(billed)
    assert billed[-1] <= replay(calls, [parse("full")])["policies"][0]["billed_input"]


# --- Incremental windows against whole ones ------------------------------------------------------

EVERY_POLICY = (
    "full,sliding_window:3,last_turns:2,user_verbatim:1,elide:1,pin_end,compaction:3:40,turns:2-3,"
    "user_verbatim:2+elide:1,recorded+pin_end"
)
events = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["user", "assistant", "tool_result", "fact", "pinned", "ok"]), max_size=4),
        st.sampled_from(["", "", "", "edit", "new_tool", "old_origin", "same_turn", "turn_back"]),
        st.sampled_from([20.0, 20.0, 400.0]),  # seconds since the previous call
        st.booleans(),  # the call asked for caching
        st.booleans(),  # an item of unknown size
    ),
    min_size=1,
    max_size=14,
)


def _varied(operations):
    """Calls whose pool grows at its end and, now and then, deep inside it or out of turn order."""
    head = [system(tokens=900), tool("search")]
    history: list[dict] = []
    calls, at, turn, number = [], 0.0, 0, 0
    for seq, (kinds, event, gap, cached, unknown) in enumerate(operations, start=1):
        turn = max(1, turn - 1) if event == "turn_back" else turn if event == "same_turn" else turn + 1
        for kind in kinds:
            number += 1
            fields = {"role": "user" if kind in ("user", "fact") else "assistant", "origin_turn": turn}
            if kind == "pinned":
                fields["pinned"] = True
            bucket = "tool_results" if kind == "tool_result" else "conversation"
            # "ok": the same text under another id, as the provider's cache sees it, the same prefix
            text, tokens = ("ok", 3) if kind == "ok" else (None, 100 + 13 * number)
            entry = item(f"i{number}", bucket, tokens, text, **fields)
            if kind == "fact":
                entry["kind"] = "fact"
            if event == "old_origin":
                entry["origin_turn"] = 1
            history.append(entry)
        if event == "edit" and history:
            history[0] = {**history[0], "hash": f"edited{seq}"}
        if event == "new_tool":
            head = [*head, tool(f"t{seq}")]
        # A new item of unknown size (an item whose count changes is another item to the prefix tree,
        # though the same to the chain of hashes).
        if unknown and kinds and kinds[-1] != "ok":
            history[-1] = {**history[-1], "tokens": None}
        at += gap
        calls.append(call(seq, [*head, *history], at=at, turn=turn, write=None if cached else 0))
    return calls


def _shapes(result):
    shapes = {}
    for entry in result["policies"]:
        windows = {seq: [(slot.item.id, slot.item.hash, slot.item.mode) for slot in window]
                   for seq, window in entry["windows"].items()}  # fmt: skip
        shapes[entry["policy"]] = {**entry, "windows": windows}
    return shapes


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events, st.integers(1, 14))
def test_incremental_windows_give_what_whole_windows_give(operations, at_turn):
    calls = _varied(operations)
    ids = sorted({entry.id for recorded in calls for entry in recorded.items})
    some = {entry.hash for recorded in calls for entry in recorded.items if entry.id.endswith("3")}
    probes = [*(Probe("item", item_id) for item_id in ids), Probe("text", "three"), Probe("text", "gone")]
    arguments = (calls, parse_list(EVERY_POLICY), probes, {"three": some, "gone": None}, at_turn)
    seqs = {recorded.seq for recorded in calls}
    incremental = _shapes(replay(*arguments, keep_windows=seqs))
    whole = _shapes(replay(*arguments, keep_windows=seqs, whole_windows=True))
    assert incremental == whole


def test_probes_per_call_say_where_each_probe_was_at_every_call():
    calls = _conversation(10, window=6)
    probes = [Probe("item", "fact:shard"), Probe("text", "nowhere")]
    [entry] = replay(calls, [parse("recorded")], probes, {"nowhere": None}, probes_per_call=True)["policies"]
    rows = entry["probes_per_call"]
    assert [row["seq"] for row in rows] == [call.seq for call in calls]
    shard = [row["places"][0]["how"] for row in rows]
    left = entry["probes"][0]["left_at_call"]
    assert shard == ["absent"] * 2 + ["verbatim"] * (left - 3) + ["absent"] * (11 - left)
    assert {row["places"][1]["how"] for row in rows} == {"unknown"}
    assert "probes_per_call" not in replay(calls, [parse("recorded")], probes)["policies"][0]


def test_a_replay_past_its_deadline_answers_the_calls_it_reached():
    calls = _conversation(10)
    result = replay(calls, parse_list("full,sliding_window:4"), deadline=time.monotonic() - 1)
    # The first call is always replayed: a deadline already past still answers something.
    assert result["partial"] == {"replayed_calls": 1, "calls": 10, "stopped_before_seq": 2}
    assert [entry["calls"] for entry in result["policies"]] == [1, 1]
    assert replay(calls, [parse("full")], deadline=time.monotonic() + 60)["partial"] is None


def test_the_cost_estimate_counts_calls_policy_steps_and_probes():
    policies = parse_list("full,sliding_window:12+elide:1+pin_end")
    assert replay_cost(1_200, policies, 20) == 1_200 * 4 * 21
    assert replay_cost(1_200, policies, 0) == 1_200 * 4
