"""Findings other than cache breaks and conflicts: one test per type, with the call and item they name."""

from dataclasses import replace

from ctxcore.analysis import AnalysisConfig, finalise_run
from tests.ctxcore.analysis.builders import analyse, call, findings_of, item, message, system, tool

RULE = item("rule-4417", "memory", 30, kind="rule", pinned=True)
FACT = item("fact-shard", "memory", 30, kind="fact")


def test_a_pinned_item_that_disappears_is_pinned_dropped_with_no_reason_given():
    results, _ = analyse([call(1, [system(), RULE, message(1)]), call(2, [system(), message(1), message(2)])])

    [finding] = findings_of(results, "pinned_dropped")
    assert (finding["call_seq"], finding["item_id"], finding["severity"]) == (2, "rule-4417", "error")
    assert finding["evidence"]["reason"] is None
    assert finding["evidence"]["without_reason"] is True
    assert finding["evidence"]["previous_seq"] == 1


def test_a_fact_that_leaves_is_fact_dropped_with_its_exclusion_reason_once():
    excluded = [{"id": "fact-shard", "reason": "compacted"}]
    calls = [
        call(1, [system(), FACT, message(1)]),
        call(2, [system(), message(1)], excluded=excluded),
        call(3, [system(), message(1), message(2)]),
    ]
    results, _ = analyse(calls)

    [finding] = findings_of(results, "fact_dropped")
    assert (finding["call_seq"], finding["item_id"], finding["severity"]) == (2, "fact-shard", "warning")
    assert (finding["evidence"]["reason"], finding["evidence"]["without_reason"]) == ("compacted", False)


def test_a_fact_replaced_by_a_newer_version_is_not_dropped():
    newer = item("fact-shard-2", "memory", 30, kind="fact", supersedes=["fact-shard"])
    results, _ = analyse([call(1, [system(), FACT]), call(2, [system(), newer])])

    assert findings_of(results, "fact_dropped") == []


def test_a_pinned_item_in_the_middle_of_a_long_window_is_lost_in_the_middle_once():
    pinned = item("rule-4417", "memory", 1000, kind="rule", pinned=True)
    long_history = [message(n, tokens=1000) for n in range(1, 21)]
    window = [system(tokens=1000), *long_history[:8], pinned, *long_history[8:]]
    results, _ = analyse([call(1, window), call(2, [*window, message(30)])])

    [finding] = findings_of(results, "lost_in_middle")
    assert (finding["call_seq"], finding["item_id"]) == (1, "rule-4417")
    assert finding["evidence"] == {"position_share": 0.432, "window_tokens": 22000}  # 9,500 of 22,000


def test_a_pinned_item_at_the_start_or_in_a_short_window_is_fine():
    pinned = item("rule-4417", "memory", 1000, kind="rule", pinned=True)
    start = [pinned, *(message(n, tokens=1000) for n in range(1, 25))]
    short = [message(1, tokens=1000), pinned, message(2, tokens=1000)]
    results, _ = analyse([call(1, start), call(2, short)])

    assert findings_of(results, "lost_in_middle") == []


def test_a_prompt_over_the_limit_exceeds_the_budget():
    budget = {"limit": 2000, "input": None, "reserved_output": 500}
    results, _ = analyse([call(1, [system(tokens=2100)], budget=budget)])

    [finding] = findings_of(results, "budget_exceeded")
    assert (finding["call_seq"], finding["severity"]) == (1, "error")
    assert finding["evidence"] == {"limit": 2000, "input": 2100, "reserved_output": 500, "free": -100}


def test_a_prompt_eating_the_output_reserve_is_reported_where_it_starts():
    budget = {"limit": 2000, "input": None, "reserved_output": 500}
    calls = [call(seq, [system(tokens=1400 + 100 * seq)], budget=budget) for seq in (1, 2, 3)]
    results, _ = analyse(calls)

    assert [finding["call_seq"] for finding in findings_of(results, "output_reserve_squeezed")] == [2]
    assert findings_of(results, "budget_exceeded") == []


def test_tools_never_called_are_unused_with_their_cost_over_the_run():
    catalogue = [tool("search_logs", 237), tool("query_metrics", 100), tool("read_file", 80)]
    calls = [
        call(1, [*catalogue, system(), message(1)], tool_calls=[{"name": "query_metrics", "id": "a"}]),
        call(2, [*catalogue, system(), message(1), message(2)]),
    ]
    _, state = analyse(calls)
    run = finalise_run(state)

    [finding] = [entry for entry in run["findings"] if entry["type"] == "unused_tools"]
    assert finding["call_seq"] is None
    assert finding["evidence"]["tools"] == [
        {"name": "read_file", "calls": 2, "tokens": 160},
        {"name": "search_logs", "calls": 2, "tokens": 474},
    ]
    assert finding["evidence"]["tokens"] == 634


def test_a_call_to_a_tool_not_in_the_catalogue_is_unknown_tool_called():
    calls = [
        call(
            1,
            [system(), message(1)],
            tool_definitions=["search_logs", "query_metrics"],
            tool_calls=[{"name": "read_log", "id": "c1"}, {"name": "search_logs", "id": "c2"}],
        )
    ]
    results, _ = analyse(calls)

    [finding] = findings_of(results, "unknown_tool_called")
    assert finding["call_seq"] == 1
    assert finding["evidence"] == {"tool": "read_log", "offered": ["query_metrics", "search_logs"]}


def test_a_call_to_a_sub_agent_its_agent_declares_is_not_an_unknown_tool():
    calls = [
        call(
            1,
            [system(), message(1)],
            tool_definitions=["final_answer"],
            agent_tools=["researcher"],
            tool_calls=[{"name": "researcher", "id": "c1"}, {"name": "read_log", "id": "c2"}],
        )
    ]
    results, _ = analyse(calls)

    [finding] = findings_of(results, "unknown_tool_called")
    assert finding["evidence"] == {"tool": "read_log", "offered": ["final_answer", "researcher"]}


def test_no_catalogue_reported_means_no_unknown_tool_finding():
    results, _ = analyse([call(1, [system()], tool_calls=[{"name": "read_log", "id": "c1"}])])

    assert findings_of(results, "unknown_tool_called") == []


def test_the_same_content_twice_is_duplicate_content():
    page = item("doc-a", "retrieved", 400, "the runbook")
    again = item("doc-b", "retrieved", 400, "the runbook")
    results, _ = analyse([call(1, [system(), page, message(1), again])])

    [finding] = findings_of(results, "duplicate_content")
    assert (finding["call_seq"], finding["item_id"], finding["severity"]) == (1, "doc-b", "info")
    assert finding["evidence"]["item_ids"] == ["doc-a", "doc-b"]
    assert finding["evidence"]["tokens"] == 400


def test_a_short_repeated_message_is_not_worth_a_finding():
    results, _ = analyse(
        [call(1, [item("yes-1", tokens=3, text="yes"), item("yes-2", tokens=3, text="yes")])]
    )

    assert findings_of(results, "duplicate_content") == []


def test_tool_output_among_the_instructions_is_untrusted_in_instructions():
    injected = item("web-page", "system", 300, trust="external", source="https://example.com")
    results, _ = analyse([call(1, [system(), injected, message(1)])])

    [finding] = findings_of(results, "untrusted_in_instructions")
    assert (finding["call_seq"], finding["item_id"]) == (1, "web-page")
    assert finding["evidence"]["trust"] == "external"


def test_tool_results_over_half_the_window_are_reported_once_at_the_first_call():
    def results_window(count):
        return [system(tokens=1000), *(item(f"r{n}", "tool_results", 500) for n in range(count))]

    calls = [call(1, results_window(1)), call(2, results_window(3)), call(3, results_window(1))]
    calls.append(call(4, results_window(4)))
    results, _ = analyse(calls)

    [finding] = findings_of(results, "tool_results_dominant")
    assert finding["call_seq"] == 2
    assert finding["evidence"] == {"share": 0.6, "tool_results_tokens": 1500, "window": 2500}


def test_billed_input_many_times_the_final_window_is_quadratic_history():
    calls = [call(seq, [system(), *(message(n) for n in range(1, seq + 1))]) for seq in range(1, 31)]
    _, state = analyse(calls)
    run = finalise_run(state)

    [finding] = [entry for entry in run["findings"] if entry["type"] == "quadratic_history"]
    assert finding["evidence"] == {"billed_input": 123000, "final_window": 7000, "ratio": 17.57, "calls": 30}


def test_a_short_run_is_not_quadratic():
    _, state = analyse([call(seq, [system(), message(seq)]) for seq in (1, 2, 3)])

    assert [entry["type"] for entry in finalise_run(state)["findings"]] == []


# --- Per agent -----------------------------------------------------------------------------------


def run_findings(calls, config=None):
    _, state = analyse(calls, config=config)
    return finalise_run(state, config) if config else finalise_run(state)


def test_a_handoff_does_not_drop_the_previous_agents_facts():
    calls = [
        call(1, [system("Triage."), FACT, message(1)], agent="triage"),
        call(2, [system("Billing."), message(1)], agent="billing"),  # billing never had the fact
        call(3, [system("Triage."), message(1), message(2)], agent="triage"),  # triage lost it
    ]
    results, _ = analyse(calls)

    [finding] = findings_of(results, "fact_dropped")
    assert (finding["call_seq"], finding["item_id"]) == (3, "fact-shard")
    assert finding["evidence"]["previous_seq"] == 1  # triage's previous call, not billing's


def test_a_condition_of_one_agent_is_reported_where_it_starts_however_the_calls_interleave():
    budget = {"limit": 2000, "input": None, "reserved_output": 500}
    squeezed = [system(tokens=1800)]
    calls = [
        call(1, squeezed, budget=budget, agent="researcher"),
        call(2, [system(tokens=100)], budget=budget, agent="writer"),
        call(3, squeezed, budget=budget, agent="researcher"),  # the same condition, still there
    ]
    results, _ = analyse(calls)

    assert [finding["call_seq"] for finding in findings_of(results, "output_reserve_squeezed")] == [1]


def test_unused_tools_are_per_agent_and_name_the_agent():
    search = tool("search_logs", 237)
    calls = [
        call(1, [search, system("Triage."), message(1)], agent="triage"),
        call(
            2,
            [search, system("Ops."), message(1)],
            tool_calls=[{"name": "search_logs", "id": "a"}],
            agent="ops",
        ),
    ]
    findings = [entry for entry in run_findings(calls)["findings"] if entry["type"] == "unused_tools"]

    [finding] = findings  # ops called it; triage paid for its definition and never did
    assert finding["evidence"]["agent"] == "triage"
    assert finding["evidence"]["tools"] == [{"name": "search_logs", "calls": 1, "tokens": 237}]
    assert finding["evidence"]["share_of_billed_input"] == round(237 / (237 + 1000 + 200), 4)


def test_a_tool_whose_result_is_in_the_window_was_called_though_no_call_said_so():
    search, fetch = tool("search_logs", 237), tool("fetch", 90)
    result = message(2, bucket="tool_results", source="search_logs")  # the result names its tool
    calls = [
        call(1, [search, fetch, system(), message(1)]),  # asked for search_logs; its output not recorded
        call(2, [search, fetch, system(), message(1), result]),
    ]
    [finding] = [entry for entry in run_findings(calls)["findings"] if entry["type"] == "unused_tools"]

    assert [entry["name"] for entry in finding["evidence"]["tools"]] == ["fetch"]


def test_no_tool_is_unused_where_a_call_was_recorded_without_its_content():
    search = tool("search_logs", 237)
    unsaid = [call(1, [search, system()]), call(2, [search, system()])]  # no message: no content
    said = [call(1, [search, system(), message(1)]), call(2, [search, system(), message(1)])]
    asked = [call(1, [search, system()], tool_calls=[{"name": "other"}]), call(2, [search, system()])]

    assert [entry["type"] for entry in run_findings(said)["findings"]] == ["unused_tools"]
    assert [entry["type"] for entry in run_findings(unsaid)["findings"]] == []
    assert [entry["type"] for entry in run_findings(asked)["findings"]] == []  # call 2 said nothing


def test_quadratic_history_is_per_agent():
    def growing(agent, seqs):
        return [
            call(seq, [system(agent), *(message(n) for n in range(1, index + 2))], agent=agent)
            for index, seq in enumerate(seqs)
        ]

    long_one = growing("researcher", range(1, 60, 2))  # 30 calls, history re-sent every time
    short_one = growing("writer", range(2, 8, 2))  # 3 calls
    calls = sorted([*long_one, *short_one], key=lambda entry: entry.seq)
    alone = run_findings(growing("researcher", range(1, 31)))["findings"]
    found = [entry for entry in run_findings(calls)["findings"] if entry["type"] == "quadratic_history"]

    [finding] = found
    [expected] = [entry for entry in alone if entry["type"] == "quadratic_history"]
    assert finding["evidence"] == {**expected["evidence"], "agent": "researcher"}


def test_agents_beyond_the_states_bound_still_count_at_the_end_of_the_run():
    config = AnalysisConfig(agents_kept=2)
    calls = [
        call(seq, [tool(f"tool_{seq}", 300), system(f"Subagent {seq}."), message(seq)], agent=f"sub-{seq}")
        for seq in range(1, 6)
    ]
    findings = [entry for entry in run_findings(calls, config)["findings"] if entry["type"] == "unused_tools"]

    assert [entry["evidence"]["agent"] for entry in findings] == ["sub-4", "sub-5", None]
    retired = findings[-1]["evidence"]
    assert retired["retired_agents"] == 3
    assert [entry["name"] for entry in retired["tools"]] == ["tool_1", "tool_2", "tool_3"]


def test_a_run_without_agents_reads_as_one_agent_without_naming_it():
    catalogue = [tool("search_logs", 237), tool("read_file", 80)]
    calls = [call(seq, [*catalogue, system(), *(message(n) for n in range(seq))]) for seq in range(1, 31)]
    named = [replace(entry, agent="solo") for entry in calls]
    plain, solo = run_findings(calls)["findings"], run_findings(named)["findings"]

    assert [entry["type"] for entry in plain] == ["unused_tools", "quadratic_history"]
    assert all("agent" not in entry["evidence"] for entry in plain)
    assert [{**entry, "evidence": {**entry["evidence"], "agent": "solo"}} for entry in plain] == solo


def test_an_unused_tool_without_a_definition_in_the_window_has_unknown_tokens_not_zero():
    search = tool("search_logs", 237)
    calls = [
        call(
            seq, [search, system(), message(1)], tool_definitions=["search_logs"], agent_tools=["researcher"]
        )
        for seq in (1, 2)
    ]
    [finding] = [entry for entry in run_findings(calls)["findings"] if entry["type"] == "unused_tools"]
    evidence = finding["evidence"]
    assert evidence["tools"] == [
        {"name": "researcher", "calls": 2, "tokens": None},
        {"name": "search_logs", "calls": 2, "tokens": 474},
    ]
    assert (evidence["tokens"], evidence["tokens_unknown_for"]) == (474, ["researcher"])  # a floor
    only = [
        call(seq, [system(), message(1)], tool_definitions=[], agent_tools=["researcher"]) for seq in (1, 2)
    ]
    [alone] = [entry for entry in run_findings(only)["findings"] if entry["type"] == "unused_tools"]
    assert (alone["evidence"]["tokens"], alone["evidence"]["share_of_billed_input"]) == (None, None)


def test_unused_tools_never_claim_more_than_the_whole_billed_input():
    search = tool("search_logs", 5000)
    calls = [
        call(1, [search, system(), message(1)], prompt_total=None),
        call(2, [search, system(), message(1)]),
    ]
    [finding] = [entry for entry in run_findings(calls)["findings"] if entry["type"] == "unused_tools"]
    # 10,000 estimated tokens of definitions over the 1 call that reported its prompt
    assert finding["evidence"]["tokens"] == 10_000
    assert finding["evidence"]["share_of_billed_input"] is None
    assert finding["severity"] == "info"
