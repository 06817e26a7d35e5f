from ctxcore.analysis import price_for
from ctxview.panels import agents

MODEL = "claude-sonnet-4-5"


def usage(uncached, write, read, output, reasoning=None):
    return {
        "uncached": uncached,
        "cache_write": write,
        "cache_read": read,
        "output": output,
        "reasoning": reasoning,
        "prompt_total": None if None in (uncached, write, read) else uncached + write + read,
    }


def row(seq, agent, invocation, parent=None, entered="root", depth=0, figures=None, model=MODEL):
    return {
        "seq": seq,
        "agent": agent,
        "invocation": invocation,
        "parent": parent,
        "entered": entered,
        "depth": depth,
        "model": model,
        "usage_raw": {},
        "usage": figures or usage(100, 0, 900, 10),
    }


def cost(figures) -> float:
    price = price_for(MODEL)
    return (
        figures["uncached"] * price.input
        + figures["cache_write"] * price.cache_write_5m
        + figures["cache_read"] * price.cache_read
        + figures["output"] * price.output
    ) / 1e6


def test_each_invocation_with_its_calls_peak_window_cost_and_the_packet_a_child_started_from():
    rows = [
        row(1, "planner", "p"),
        row(2, "expert", "e", "p", "delegation", 1, usage(50, 400, 0, 5)),
        row(3, "expert", "e", "p", "delegation", 1, usage(60, 0, 400, 7)),
        row(4, "planner", "p", figures=usage(200, 0, 900, 20)),
    ]
    items = {
        "p": [{"kind": "system", "tokens": 50}, {"kind": "message", "tokens": 20}],
        "e": [
            {"kind": "system", "tokens": 400},
            {"kind": "message", "tokens": 12},
            {"kind": "tool_result", "tokens": 8},
        ],
    }
    found = {entry["id"]: entry for entry in agents.invocations(rows, items, lambda model: price_for(model))}
    assert found["p"]["seqs"] == [1, 4] and found["p"]["packet"] is None
    assert found["p"]["peak_window"] == 1100 and found["p"]["output"] == 30
    assert found["e"]["packet"] == {"messages": 2, "tokens": 20}
    assert (found["e"]["parent"], found["e"]["entered"], found["e"]["depth"]) == ("p", "delegation", 1)
    assert found["e"]["cost_usd"] == round(cost(usage(50, 400, 0, 5)) + cost(usage(60, 0, 400, 7)), 6)
    assert agents.handoffs({"invocations": list(found.values())}) == [
        {
            "from": "planner",
            "to": "expert",
            "entered": "delegation",
            "first_seq": 2,
            "packet": found["e"]["packet"],
        }
    ]


def test_a_child_without_captured_content_has_no_packet():
    rows = [row(1, "triage", "t"), row(2, "billing", "b", "t", "handoff")]
    found = agents.invocations(rows, {}, lambda model: None)
    assert [entry["packet"] for entry in found] == [None, None]
    assert [entry["cost_usd"] for entry in found] == [None, None]  # no price: no cost


def group(agent, figures, calls=1, unknown=None, model=MODEL):
    return {"agent": agent, "model": model, "calls": calls, "usage": figures, "unknown": unknown or {}}


def test_agent_totals_sum_usage_and_cost_and_never_price_a_partial_sum():
    groups = [
        group("planner", usage(100, 0, 900, 10), calls=2, unknown={"reasoning": 2}),
        group("expert", usage(50, 400, 0, 5)),
        group("expert", usage(10, 0, 0, 1), model="no-such-model"),
        group("scout", usage(10, 0, 0, 1), calls=2, unknown={"cache_read": 1}),
    ]
    totals = {agent["name"]: agent for agent in agents.agent_totals(groups, lambda model: price_for(model))}
    assert totals["planner"]["calls"] == 2
    assert totals["planner"]["usage_unknown_calls"] == {"reasoning": 2}
    assert totals["planner"]["cost_usd"] == round(cost(usage(100, 0, 900, 10)), 6)  # reasoning is not priced
    assert totals["expert"]["usage"]["prompt_total"] == 460 and totals["expert"]["cost_usd"] is None
    assert totals["scout"]["cost_usd"] is None


def test_the_summary_counts_the_agents():
    panel = agents.AgentsPanel()
    assert panel.summary({"agents": [{"name": "lead"}, {"name": "researcher"}]}) == "2 agents"
    assert panel.summary({"agents": [{"name": "lead"}, {"name": ""}]}) == "1 agent"  # + calls naming none


def test_agent_totals_price_one_hour_cache_writes_at_their_own_rate():
    price = price_for(MODEL)
    figures = usage(7, 2950, 0, 33)
    one_hour = {**group("researcher", figures), "cache_write_1h": 950}
    [total] = agents.agent_totals([one_hour], lambda model: price)
    expected = cost(figures) + 950 * (price.cache_write_1h - price.cache_write_5m) / 1e6
    assert price.cache_write_1h > price.cache_write_5m
    assert total["cost_usd"] == round(expected, 6)
    # A group that wrote more 1-hour tokens than cache writes in all is capped at its writes.
    [capped] = agents.agent_totals([{**one_hour, "cache_write_1h": 10**6}], lambda model: price)
    assert capped["cost_usd"] == round(cost(usage(7, 0, 0, 33)) + 2950 * price.cache_write_1h / 1e6, 6)


def test_an_invocation_prices_its_calls_one_hour_writes_from_their_reported_usage():
    price = price_for(MODEL)
    figures = usage(7, 2950, 0, 33)
    raw = {"gen_ai.usage.cache_creation.ephemeral_1h_input_tokens": 950}
    [found] = agents.invocations(
        [{**row(1, "researcher", "r", figures=figures), "usage_raw": raw}], {}, lambda m: price
    )
    assert found["cost_usd"] == round(
        cost(figures) + 950 * (price.cache_write_1h - price.cache_write_5m) / 1e6, 6
    )
