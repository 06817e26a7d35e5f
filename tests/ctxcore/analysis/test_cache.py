"""Cache reuse and breaks: one test per cause, on manifests built for the purpose."""

import pytest

from ctxcore.analysis import AnalysisConfig, analyse_call, limits, new_state
from tests.ctxcore.analysis.builders import analyse, call, digest, findings_of, message, system, tool

TOOLS = [tool("search_logs"), tool("query_metrics")]  # 600 tokens each
SYSTEM = system()  # 1000 tokens


def first_call(**options):
    return call(1, [*TOOLS, SYSTEM, message(1)], **options)  # 2400 tokens, all written to the cache


def second(items, **options):
    """The second call; by default it reads nothing from the cache (as after a break)."""
    options.setdefault("read", 0)
    return call(2, items, **options)


def cache_of(*calls):
    results, _ = analyse(calls)
    return results[-1]["cache"], results


def test_a_growing_history_reuses_the_whole_previous_prompt():
    cache, results = cache_of(first_call(), call(2, [*TOOLS, SYSTEM, message(1), message(2)], read=2400))

    assert cache["broke"] is False
    assert cache["cause"] is None
    assert cache["reference_seq"] == 1
    assert (cache["reusable_items"], cache["expected_read"], cache["reported_read"]) == (4, 2400, 2400)
    assert results[-1]["findings"] == []


def test_a_tool_added_mid_run_breaks_the_cache_at_the_new_tool():
    cache, results = cache_of(
        first_call(), second([*TOOLS, tool("read_log"), SYSTEM, message(1), message(2)])
    )

    assert (cache["cause"], cache["invalidator_item_id"]) == ("tools_changed", "tool:read_log")
    assert cache["detail"]["change"] == "added"
    assert cache["detail"]["added"] == ["tool:read_log"]
    assert cache["expected_read"] == 1200  # the two unchanged tools are still a reusable prefix
    assert cache["tokens_rewritten"] == 1200  # system + first message, written again
    assert cache["cost_usd"] == pytest.approx(1200 * (3.75 - 0.30) / 1e6)
    [finding] = results[-1]["findings"]
    assert (finding["type"], finding["call_seq"], finding["item_id"], finding["cause"]) == (
        "cache_invalidated",
        2,
        "tool:read_log",
        "tools_changed",
    )
    assert finding["severity"] == "warning"
    assert finding["fix"]


def test_a_removed_tool_is_named_in_the_detail():
    cache, _ = cache_of(first_call(), second([TOOLS[1], SYSTEM, message(1)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("tools_changed", "tool:query_metrics")
    assert cache["detail"]["change"] == "removed"
    assert cache["detail"]["removed"] == ["tool:search_logs"]
    assert cache["expected_read"] == 0
    assert cache["tokens_rewritten"] == 2400


def test_reordered_tools_break_the_cache():
    cache, _ = cache_of(first_call(), second([TOOLS[1], TOOLS[0], SYSTEM, message(1)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("tools_changed", "tool:query_metrics")
    assert cache["detail"]["change"] == "reordered"
    assert cache["detail"]["reordered"] is True


def test_a_changed_tool_schema_breaks_the_cache():
    changed = tool("query_metrics", text='{"name":"query_metrics","description":"now with a window"}')
    cache, _ = cache_of(first_call(), second([TOOLS[0], changed, SYSTEM, message(1)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("tools_changed", "tool:query_metrics")
    assert cache["detail"]["change"] == "schema_changed"
    assert cache["detail"]["schema_changed"] == ["tool:query_metrics"]


def test_a_date_in_the_system_prompt_is_a_volatile_invalidator_with_the_bytes_shown():
    old_text, new_text = "Today is 2026-11-29. Be brief.", "Today is 2026-11-30. Be brief."
    first = call(1, [*TOOLS, system(old_text), message(1)])
    contents = {digest(old_text): old_text, digest(new_text): new_text}
    cache, results = cache_of(first, second([*TOOLS, system(new_text), message(1)], contents=contents))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("volatile_system_prompt", "system:0")
    assert cache["detail"]["volatile"] == "date"
    assert cache["detail"]["bytes"]["old"] == "29"
    assert cache["detail"]["bytes"]["new"] == "30"
    assert cache["detail"]["bytes"]["before"].endswith("Today is 2026-11-")
    assert findings_of(results, "cache_invalidated")[0]["cause"] == "volatile_system_prompt"


def test_an_edited_system_prompt_without_a_volatile_value_is_system_changed():
    old_text, new_text = "Be brief.", "Be thorough and cite sources."
    first = call(1, [*TOOLS, system(old_text), message(1)])
    contents = {digest(old_text): old_text, digest(new_text): new_text}
    cache, _ = cache_of(first, second([*TOOLS, system(new_text), message(1)], contents=contents))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("system_changed", "system:0")
    assert "volatile" not in cache["detail"]


def test_a_system_change_without_content_is_system_changed():
    cache, _ = cache_of(first_call(), second([*TOOLS, system("Another prompt."), message(1)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("system_changed", "system:0")
    assert "bytes" not in cache["detail"]


def test_the_same_json_with_another_key_order_is_a_key_order_break():
    old_text = '{"name":"query_metrics","parameters":{"type":"object"}}'
    new_text = '{"parameters":{"type":"object"},"name":"query_metrics"}'
    first = call(1, [TOOLS[0], tool("query_metrics", text=old_text), SYSTEM, message(1)])
    contents = {digest(old_text): old_text, digest(new_text): new_text}
    later = second([TOOLS[0], tool("query_metrics", text=new_text), SYSTEM, message(1)], contents=contents)
    cache, results = cache_of(first, later)

    assert (cache["cause"], cache["invalidator_item_id"]) == ("key_order", "tool:query_metrics")
    assert cache["detail"]["area"] == "tools"
    assert findings_of(results, "cache_invalidated")[0]["cause"] == "key_order"


def test_dropping_the_oldest_message_rewrites_history():
    first = call(1, [*TOOLS, SYSTEM, message(1), message(2), message(3)])
    excluded = [{"id": "m1", "reason": "sliding_window"}]
    cache, _ = cache_of(
        first, second([*TOOLS, SYSTEM, message(2), message(3), message(4)], excluded=excluded)
    )

    assert (cache["cause"], cache["invalidator_item_id"]) == ("history_rewritten", "m2")
    assert cache["detail"]["change"] == "removed"
    assert cache["detail"]["removed_item_id"] == "m1"
    assert cache["detail"]["excluded_reason"] == "sliding_window"
    assert cache["expected_read"] == 2200  # tools and system are still reusable
    assert cache["tokens_rewritten"] == 600


def test_compaction_into_a_summary_rewrites_history():
    first = call(1, [*TOOLS, SYSTEM, message(1), message(2), message(3)])
    summary = message(90, bucket="summary", mode="summary")
    cache, _ = cache_of(first, second([*TOOLS, SYSTEM, summary, message(3)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("history_rewritten", "m90")
    assert cache["detail"]["change"] == "compacted"


def test_an_edited_message_rewrites_history():
    first = call(1, [*TOOLS, SYSTEM, message(1), message(2)])
    edited = message(1, text="m1, edited")
    cache, _ = cache_of(first, second([*TOOLS, SYSTEM, edited, message(2)]))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("history_rewritten", "m1")
    assert cache["detail"]["change"] == "edited"


def test_a_model_switch_loses_the_whole_cache():
    items = [*TOOLS, SYSTEM, message(1), message(2)]
    cache, _ = cache_of(first_call(), second(items, model="claude-haiku-4-5-20251001"))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("model_changed", None)
    assert cache["detail"] == {"from": "claude-sonnet-4-5-20250929", "to": "claude-haiku-4-5-20251001"}
    assert cache["expected_read"] == 0
    assert cache["tokens_rewritten"] == 2400
    assert cache["cost_usd"] == pytest.approx(2400 * (1.25 - 0.10) / 1e6)  # priced at the new model


def test_a_gap_over_five_minutes_expires_the_cache():
    first = first_call(at=0, duration=2)
    cache, _ = cache_of(first, second([*TOOLS, SYSTEM, message(1), message(2)], at=2 + 301))

    assert (cache["cause"], cache["invalidator_item_id"]) == ("ttl_expired", None)
    assert cache["detail"] == {"gap_s": 301.0, "ttl_s": 300}
    assert cache["expected_read"] == 0


def test_the_one_hour_cache_survives_a_ten_minute_gap():
    raw = {"gen_ai.usage.cache_creation.ephemeral_1h_input_tokens": 2400}
    first = first_call(at=0, usage_raw=raw)
    cache, _ = cache_of(first, call(2, [*TOOLS, SYSTEM, message(1), message(2)], at=600, read=2400))

    assert cache["cause"] is None
    assert cache["expected_read"] == 2400


def test_a_breakpoint_below_the_minimum_is_reported_once_as_below_minimum():
    short = [tool("search_logs", tokens=300), system(tokens=500, cache_breakpoint=True), message(1)]
    calls = [
        call(seq, [*short, *(message(n) for n in range(2, seq + 1))], read=0, write=0) for seq in (1, 2, 3)
    ]
    results, _ = analyse(calls)

    assert results[0]["cache"]["cause"] == "below_minimum"
    assert results[0]["cache"]["invalidator_item_id"] == "system:0"
    assert results[0]["cache"]["detail"] == {"prefix_tokens": 800, "minimum": 1024}
    assert results[0]["cache"]["broke"] is False
    [finding] = findings_of(results, "cache_invalidated")
    assert (finding["call_seq"], finding["cause"], finding["severity"]) == (1, "below_minimum", "info")


def test_haiku_4_5_needs_4096_tokens_before_it_caches():
    model = "claude-haiku-4-5"
    items = [*TOOLS, SYSTEM, message(1, cache_breakpoint=True)]
    marked = sum(entry["tokens"] for entry in items)
    results, _ = analyse([call(seq, items, model=model, read=0, write=0) for seq in (1, 2)])

    assert [result["cache"]["cause"] for result in results] == ["below_minimum"] * 2
    assert results[0]["cache"]["detail"] == {"prefix_tokens": marked, "minimum": 4096}
    assert [finding["call_seq"] for finding in findings_of(results, "cache_invalidated")] == [1]
    assert results[1]["cache"]["expected_read"] == 0  # nothing was cached, so nothing to expect


def test_a_cache_the_provider_reported_proves_the_prefix_long_enough_whatever_our_count():
    model = "claude-haiku-4-5"  # our count (2400) is below its 4096, yet call 1 reports writing it
    cache, results = cache_of(
        first_call(model=model), call(2, [*TOOLS, SYSTEM, message(1)], model=model, read=0)
    )

    assert cache["minimum"] == 4096
    assert cache["expected_read"] == 2400
    assert cache["cause"] == "invisible"  # the provider cached it, and call 2 read none of it
    assert findings_of(results, "cache_invalidated") == []


def test_identical_chains_with_a_much_smaller_cache_read_are_an_invisible_invalidator():
    cache, results = cache_of(first_call(), call(2, [*TOOLS, SYSTEM, message(1), message(2)], read=0))

    assert cache["broke"] is True
    assert (cache["cause"], cache["invalidator_item_id"]) == ("invisible", None)
    assert (cache["expected_read"], cache["reported_read"]) == (2400, 0)
    assert cache["tokens_rewritten"] == 2400
    [finding] = findings_of(results, "invisible_invalidator")
    assert (finding["call_seq"], finding["cause"]) == (2, "invisible")


def test_a_small_shortfall_is_not_an_invisible_invalidator():
    cache, _ = cache_of(first_call(), call(2, [*TOOLS, SYSTEM, message(1), message(2)], read=2304))

    assert cache["cause"] is None  # OpenAI-style 128-token steps, or a breakpoint a little earlier


@pytest.mark.parametrize(
    ("diagnosis", "disagrees"), [("system_changed", False), ("tools_changed", True), ("unavailable", None)]
)
def test_the_providers_own_diagnosis_is_shown_beside_ours(diagnosis, disagrees):
    raw = {"gen_ai.usage.cache_miss_reason": f'{{"type": "{diagnosis}", "cache_missed_input_tokens": 1000}}'}
    later = second([*TOOLS, system("Another prompt."), message(1)], usage_raw=raw)
    cache, results = cache_of(first_call(), later)

    assert cache["cause"] == "system_changed"
    assert (cache["provider_diagnosis"], cache["disagrees"]) == (diagnosis, disagrees)
    assert findings_of(results, "cache_invalidated")[0]["evidence"]["disagrees"] is disagrees


def test_a_provider_diagnosis_without_a_break_on_our_side_disagrees():
    raw = {"gen_ai.usage.cache_miss_reason": "messages_changed"}
    cache, _ = cache_of(
        first_call(), call(2, [*TOOLS, SYSTEM, message(1), message(2)], read=2400, usage_raw=raw)
    )

    assert cache["cause"] is None
    assert (cache["provider_diagnosis"], cache["disagrees"]) == ("messages_changed", True)


def test_the_reference_is_the_call_whose_prompt_continues_not_another_agents():
    agent_a = [*TOOLS, system("Agent A."), message(1)]
    agent_b = [*TOOLS, system("Agent B."), message(2)]
    calls = [call(1, agent_a), call(2, agent_b), call(3, [*agent_a, message(3)], read=2400)]
    results, _ = analyse(calls)

    assert results[1]["cache"]["cause"] == "system_changed"  # a new prefix: agent B's first call
    assert results[2]["cache"]["reference_seq"] == 1
    assert results[2]["cache"]["cause"] is None
    assert results[2]["cache"]["expected_read"] == 2400


def test_automatic_caching_providers_cache_without_reporting_writes():
    calls = [
        call(1, [*TOOLS, SYSTEM, message(1)], model="gpt-4.1", provider="openai", write=0),
        call(2, [*TOOLS, system("Changed."), message(1)], model="gpt-4.1", provider="openai", write=0),
    ]
    results, _ = analyse(calls)

    assert results[1]["cache"]["cause"] == "system_changed"
    assert results[1]["cache"]["cost_usd"] == pytest.approx(1200 * (2.00 - 0.50) / 1e6)  # no write charge


def test_a_repeated_break_of_the_same_kind_is_reported_where_it_starts():
    calls = [call(1, [*TOOLS, system("Call 1"), message(1)])]
    calls += [call(seq, [*TOOLS, system(f"Call {seq}"), message(1)], read=0) for seq in (2, 3, 4)]
    calls.append(call(5, [*TOOLS, system("Call 4"), message(1), message(2)], read=2400))
    calls.append(call(6, [*TOOLS, system("Call 6"), message(1)], read=0))
    results, _ = analyse(calls)

    assert [result["cache"]["cause"] for result in results] == [
        None,
        *["system_changed"] * 3,
        None,
        "system_changed",
    ]
    assert [finding["call_seq"] for finding in findings_of(results, "cache_invalidated")] == [2, 6]


def test_the_state_keeps_a_bounded_number_of_recent_chains():
    config = AnalysisConfig(recent_calls=3)
    state = new_state()
    for seq in range(1, 11):
        _, state = analyse_call(state, call(seq, [*TOOLS, SYSTEM, *(message(n) for n in range(seq))]), config)
    assert [entry["seq"] for entry in state["recent"]] == [10, 9, 8]


def test_expired_chains_leave_the_state():
    state = new_state()
    _, state = analyse_call(state, first_call(at=0))
    _, state = analyse_call(state, call(2, [*TOOLS, SYSTEM], at=1000, read=0, write=0, provider="anthropic"))
    assert state["recent"] == []


# --- One cache chain per agent -------------------------------------------------------------------

TRIAGE = [tool("transfer_to_billing"), tool("lookup_order"), system("You are the triage agent.")]
BILLING = [tool("issue_refund"), tool("lookup_invoice"), system("You are the billing agent.")]


def total(items):
    return sum(entry["tokens"] for entry in items)


def test_a_handoff_to_another_agent_is_not_a_cache_break():
    calls = [
        call(1, [*TRIAGE, message(1)], agent="triage"),
        call(2, [*TRIAGE, message(1), message(2)], read=total([*TRIAGE, message(1)]), agent="triage"),
        call(3, [*BILLING, message(1), message(2)], read=0, agent="billing"),  # the handoff
        call(4, [*BILLING, message(1), message(2), message(3)], read=total(BILLING) + 400, agent="billing"),
    ]
    results, _ = analyse(calls)

    assert [result["cache"]["cause"] for result in results] == [None] * 4
    assert results[2]["cache"]["reference_seq"] is None  # billing's first call: nothing of its own yet
    assert results[3]["cache"]["reference_seq"] == 3
    assert results[3]["cache"]["expected_read"] == total(BILLING) + 400
    assert [result["findings"] for result in results] == [[]] * 4


def test_without_agents_the_same_handoff_reads_as_a_tools_break():
    calls = [
        call(1, [*TRIAGE, message(1)]),
        call(2, [*TRIAGE, message(1), message(2)], read=total([*TRIAGE, message(1)])),
        call(3, [*BILLING, message(1), message(2)], read=0),
    ]
    results, _ = analyse(calls)

    assert results[2]["cache"]["cause"] == "tools_changed"  # what ctxview said before issue 14


def test_a_real_break_inside_an_agent_is_found_against_that_agents_previous_call():
    changed = system("You are the triage agent. Today is 2026-12-01.")
    calls = [
        call(1, [*TRIAGE, message(1)], agent="triage"),
        call(2, [*BILLING, message(1)], read=0, agent="billing"),
        call(3, [*BILLING, message(1), message(2)], read=total([*BILLING, message(1)]), agent="billing"),
        call(4, [*TRIAGE[:2], changed, message(1), message(2)], read=0, agent="triage"),
    ]
    results, _ = analyse(calls)

    cache = results[3]["cache"]
    assert (cache["cause"], cache["invalidator_item_id"], cache["reference_seq"]) == (
        "system_changed",
        "system:0",
        1,
    )
    assert cache["expected_read"] == total(TRIAGE[:2])  # triage's two tools are still its reusable prefix
    [finding] = findings_of(results, "cache_invalidated")
    assert (finding["call_seq"], finding["cause"]) == (4, "system_changed")


def test_an_agent_that_comes_back_continues_its_own_chain():
    calls = [
        call(1, [*TRIAGE, message(1)], agent="triage"),
        call(2, [*BILLING, message(1)], read=0, agent="billing"),
        call(3, [*TRIAGE, message(1), message(2)], read=total([*TRIAGE, message(1)]), agent="triage"),
    ]
    results, _ = analyse(calls)

    assert results[2]["cache"]["reference_seq"] == 1
    assert results[2]["cache"]["expected_read"] == total([*TRIAGE, message(1)])
    assert results[2]["cache"]["cause"] is None


def test_the_state_keeps_a_bounded_number_of_chains_per_agent_and_of_agents():
    config = AnalysisConfig(recent_calls=2, agents_kept=3)
    state = new_state()
    for seq in range(1, 41):
        agent = f"subagent-{seq // 4}"  # ten subagents of four calls each
        items = [*TOOLS, system(f"You are {agent}."), *(message(n) for n in range(seq % 4 + 1))]
        _, state = analyse_call(state, call(seq, items, agent=agent), config)

    agents = [entry["agent"] for entry in state["recent"]]
    assert len(agents) <= 2 * 3
    assert list(dict.fromkeys(agents)) == ["subagent-10", "subagent-9", "subagent-8"]  # most recent first
    assert all(agents.count(agent) <= 2 for agent in agents)
    assert [lane["agent"] for lane in state["lanes"]] == ["subagent-10", "subagent-9", "subagent-8"]


COMPACTED = limits.context_edit_figures([{"type": "compacted"}])
CLEARED = limits.context_edit_figures(
    [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 600}]
)


def test_a_compaction_the_call_reports_is_the_cause_of_its_break_not_a_rewritten_history():
    first = call(1, [*TOOLS, SYSTEM, message(1), message(2), message(3)])
    summary = message(90, bucket="summary", mode="summary")
    cache, results = cache_of(first, second([*TOOLS, SYSTEM, summary, message(3)], usage_raw=COMPACTED))

    assert (cache["cause"], cache["invalidator_item_id"], cache["broke"]) == ("context_edited", "m90", True)
    assert cache["detail"]["edits"] == [{"type": "compacted"}]
    assert (cache["detail"]["as_if"], cache["detail"]["change"]) == ("history_rewritten", "compacted")
    assert cache["tokens_rewritten"] == 600  # the three messages the summary replaced
    assert cache["cost_usd"] == pytest.approx(600 * (3.75 - 0.30) / 1e6)
    [finding] = results[-1]["findings"]
    assert (finding["type"], finding["cause"], finding["severity"]) == (
        "cache_invalidated",
        "context_edited",
        "info",
    )


def test_a_compaction_flag_without_a_break_is_no_finding():
    cache, results = cache_of(
        first_call(), call(2, [*TOOLS, SYSTEM, message(1), message(2)], read=2400, usage_raw=COMPACTED)
    )
    assert (cache["cause"], cache["broke"], results[-1]["findings"]) == (None, False, [])


def tool_turns():
    results = [message(number, bucket="tool_results", tokens=300) for number in (11, 12)]
    return [*TOOLS, SYSTEM, message(1), *results]


def test_cleared_tool_results_cost_what_the_reported_read_fell_short_of_the_cached_prefix():
    """Anthropic clears tool results inside the request: the trace shows the same prefix, and only the
    reported read says the cache was cut at the first cleared result."""
    first = call(1, tool_turns())  # 3000 tokens written
    later = call(2, [*tool_turns(), message(2)], read=2400, usage_raw=CLEARED)
    cache, results = cache_of(first, later)

    assert (cache["cause"], cache["invalidator_item_id"]) == ("context_edited", "m11")
    assert (cache["expected_read"], cache["reported_read"], cache["tokens_rewritten"]) == (3000, 2400, 600)
    assert cache["detail"]["edits"][0]["cleared_tool_uses"] == 2
    assert cache["calibration_note"] is None
    [finding] = results[-1]["findings"]
    assert (finding["cause"], finding["severity"]) == ("context_edited", "info")


def test_the_providers_count_of_missed_tokens_outranks_our_shortfall():
    missed = {**CLEARED, "anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens": 355}
    later = call(2, [*tool_turns(), message(2)], read=2400, usage_raw=missed)
    cache, _ = cache_of(call(1, tool_turns()), later)
    assert (cache["cause"], cache["tokens_rewritten"]) == ("context_edited", 355)


def test_the_same_shortfall_without_an_edit_stays_below_the_invisible_threshold():
    cache, results = cache_of(call(1, tool_turns()), call(2, [*tool_turns(), message(2)], read=2400))
    assert (cache["cause"], results[-1]["findings"]) == (None, [])


def test_a_context_edit_on_a_call_that_read_everything_is_no_break():
    later = call(2, [*tool_turns(), message(2)], read=3000, usage_raw=CLEARED)
    cache, _ = cache_of(call(1, tool_turns()), later)
    assert (cache["cause"], cache["broke"]) == (None, False)


def test_context_edits_round_trip_through_the_reported_usage():
    edits = [{"type": "compacted"}, {"type": "clear_thinking_20251015", "cleared_thinking_turns": 3}]
    raw = {**limits.context_edit_figures(edits), "gen_ai.usage.input_tokens": 10}
    assert limits.context_edits(raw) == edits
    assert (
        limits.context_edits({"ctxview.context_edits.x.type": "a", "ctxview.context_edits.0.cleared_a": 1})
        == []
    )
