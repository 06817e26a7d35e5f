"""Each policy on a small hand-made pool, and the spec strings."""

import pytest

from ctxcore.replay import BadPolicy, Moment, Slot, parse, parse_list
from ctxcore.replay.policies import STUB_TOKENS, is_replayed
from ctxcore.vocabulary import Item
from tests.ctxcore.analysis.builders import item, system, tool


def _pool() -> list[Slot]:
    """Head (tool, system, memory) and four turns of history: user, assistant, tool result each."""
    stored = [tool("search"), system(), item("memory:notes", "memory", 50, kind="memory")]
    for turn in range(1, 5):
        stored += [
            item(f"u{turn}", tokens=20, role="user", origin_turn=turn),
            item(f"a{turn}", tokens=30, role="assistant", origin_turn=turn),
            item(f"r{turn}", "tool_results", 400, role="user", origin_turn=turn),
        ]
    stored.append(item("fact:shard", tokens=15, kind="fact", role="user", origin_turn=2))
    return [Slot(Item.from_dict(entry, index)) for index, entry in enumerate(stored)]


def _moment(pool: list[Slot], turn: int = 4) -> Moment:
    return Moment(turn, {slot.item.id: slot.item.origin_turn or 0 for slot in pool})


def _ids(window: list[Slot]) -> list[str]:
    return [slot.item.id for slot in window]


HEAD = ["tool:search", "system:0", "memory:notes"]


def test_full_keeps_every_item_in_pool_order():
    pool = _pool()
    assert _ids(parse("full").window(pool, _moment(pool))) == _ids(pool)


def test_recorded_is_what_the_call_held_whatever_the_pool():
    pool = _pool()
    held = (pool[1].item, pool[4].item)
    moment = Moment(4, _moment(pool).turn_of, held)
    assert _ids(parse("recorded").window(pool, moment)) == ["system:0", "a1"]


def test_sliding_window_keeps_the_last_n_history_items_and_the_head():
    pool = _pool()
    assert _ids(parse("sliding_window:4").window(pool, _moment(pool))) == [
        *HEAD,
        "u4",
        "a4",
        "r4",
        "fact:shard",
    ]


def test_last_turns_keeps_the_history_of_the_last_k_turns():
    pool = _pool()
    assert _ids(parse("last_turns:2").window(pool, _moment(pool))) == [
        *HEAD, "u3", "a3", "r3", "u4", "a4", "r4",
    ]  # fmt: skip


def test_user_verbatim_keeps_every_user_message_but_not_old_tool_results():
    pool = _pool()
    window = _ids(parse("user_verbatim:1").window(pool, _moment(pool)))
    assert window == [*HEAD, "u1", "u2", "u3", "u4", "a4", "r4", "fact:shard"]


def test_elide_replaces_old_tool_results_by_stubs_with_their_ids():
    pool = _pool()
    window = parse("elide:2").window(pool, _moment(pool))
    stubs = [slot for slot in window if slot.replaces]
    assert [slot.item.id for slot in stubs] == ["r1", "r2"]
    assert all(slot.item.tokens == STUB_TOKENS and slot.item.mode == "reference" for slot in stubs)
    assert all(is_replayed(slot.item) and slot.known for slot in stubs)
    assert [slot.replaces[0].tokens for slot in stubs] == [400, 400]
    assert _ids(window) == _ids(pool)


def test_pin_end_moves_pinned_items_facts_and_rules_to_the_end():
    pool = _pool()
    window = _ids(parse("pin_end").window(pool, _moment(pool)))
    assert window[-1] == "fact:shard" and sorted(window) == sorted(_ids(pool))


def test_compaction_replaces_the_history_before_the_last_boundary_by_one_unknown_summary():
    pool = _pool()
    window = parse("compaction:2:300").window(pool, _moment(pool, turn=4))
    summaries = [slot for slot in window if slot.item.kind == "summary"]
    [summary] = summaries
    assert summary.item.tokens == 300 and not summary.known
    assert {entry.id for entry in summary.replaces} == {"u1", "a1", "r1", "u2", "a2", "r2", "fact:shard"}
    assert _ids(window) == [*HEAD, summary.item.id, "u3", "a3", "r3", "u4", "a4", "r4"]


def test_compaction_before_its_first_boundary_changes_nothing():
    pool = _pool()
    assert _ids(parse("compaction:10").window(pool, _moment(pool))) == _ids(pool)


def test_a_new_compaction_makes_a_new_summary():
    pool = _pool()
    first = parse("compaction:1").window(pool, _moment(pool, turn=2))
    second = parse("compaction:1").window(pool, _moment(pool, turn=3))
    assert first[3].item.hash != second[3].item.hash


def test_turns_gives_a_sub_agent_only_those_turns():
    pool = _pool()
    assert _ids(parse("turns:2-3").window(pool, _moment(pool))) == [
        *HEAD, "u2", "a2", "r2", "u3", "a3", "r3", "fact:shard",
    ]  # fmt: skip


def test_steps_compose_left_to_right():
    pool = _pool()
    window = parse("user_verbatim:2+elide:1+pin_end").window(pool, _moment(pool))
    assert _ids(window) == [*HEAD, "u1", "u2", "u3", "a3", "r3", "u4", "a4", "r4", "fact:shard"]
    assert [slot.item.id for slot in window if slot.replaces] == ["r3"]


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        (" sliding_window:12 ", "sliding_window:12"),
        ("compaction:5", "compaction:5"),
        ("compaction:5:800", "compaction:5:800"),
        ("turns:17-19", "turns:17-19"),
        ("recorded+pin_end", "recorded+pin_end"),
    ],
)
def test_a_spec_reads_back_as_its_canonical_string(spec, canonical):
    assert parse(spec).spec == canonical


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("window:3", "unknown policy 'window'"),
        ("sliding_window", "sliding_window is written sliding_window:N"),
        ("sliding_window:0", "N must be a whole number from 1"),
        ("sliding_window:-1", "N must be a whole number"),
        ("sliding_window:1e3", "N must be a whole number"),
        ("full:3", "full is written full"),
        ("turns:9-3", "turns:A-B"),
        ("pin_end+full", "can only start"),
        ("x" * 201, "longer than 200"),
        ("élide:3", "unknown policy"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec, message):
    with pytest.raises(BadPolicy, match=message):
        parse(spec)


def test_a_list_keeps_each_policy_once_in_order_and_has_a_limit():
    assert [policy.spec for policy in parse_list("full,recorded,full")] == ["full", "recorded"]
    with pytest.raises(BadPolicy, match="at most 2"):
        parse_list("full,recorded,pin_end", limit=2)
