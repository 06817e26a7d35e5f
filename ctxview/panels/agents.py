"""Agents of a session: which agent made which calls, its tokens, cost and window; each invocation with
its parent and how it was entered, and what crossed each boundary (the packet of messages handed over)."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcore.analysis import limits
from ctxcore.analysis.accounting import usage_cost
from ctxcore.vocabulary import Usage
from ctxview.panels.base import Panel
from ctxview.shapes import words

# The messages a child invocation starts from: what its parent handed over (its own instructions and
# tools are not part of the packet).
PACKET_KINDS = ("message", "tool_result")
# The figures a call's cost is computed from: a sum that misses one of them for a call is no cost.
COST_FIGURES = ("uncached", "cache_write", "cache_read", "output")


def _add(total: int | None, value: int | None) -> int | None:
    return total if value is None else (total or 0) + value


def _cost(usage: Mapping[str, int | None], model: str | None, prices, one_hour: int) -> float | None:
    """USD as billed; ``one_hour``: the cache-write tokens that went to the 1-hour cache."""
    price = prices(model) if model else None
    cost = usage_cost(Usage.from_dict(usage), one_hour, price)
    return cost[0] if cost else None


def agent_totals(groups: Sequence[Mapping[str, Any]], prices) -> list[dict]:
    """Per agent: calls, summed usage (and how many calls did not report each figure), cost in USD.

    ``groups``: usage summed by agent and model (``queries.agent_groups``). Cost is null when a call has no
    price or an unknown figure (never a partial sum); each cache write is priced at its lifetime's rate
    (``cache_write_1h``: the group's writes to the 1-hour cache, the rest went to the 5-minute one)."""
    agents: dict[str, dict] = {}
    for group in groups:
        agent = agents.setdefault(
            group["agent"],
            {
                "name": group["agent"],
                "calls": 0,
                "usage": dict.fromkeys(group["usage"]),
                "usage_unknown_calls": {},
                "cost_usd": 0.0,
            },
        )
        agent["calls"] += group["calls"]
        for name, value in group["usage"].items():
            agent["usage"][name] = _add(agent["usage"][name], value)
        for name, count in group["unknown"].items():
            agent["usage_unknown_calls"][name] = agent["usage_unknown_calls"].get(name, 0) + count
        partial = any(name in group["unknown"] for name in COST_FIGURES)
        one_hour = group.get("cache_write_1h", 0)
        cost = None if partial else _cost(group["usage"], group["model"], prices, one_hour)
        agent["cost_usd"] = None if cost is None or agent["cost_usd"] is None else agent["cost_usd"] + cost
    for agent in agents.values():
        if agent["cost_usd"] is not None:
            agent["cost_usd"] = round(agent["cost_usd"], 6)
    return list(agents.values())


def unnamed_groups(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The calls that name no agent (a CLI's main loop beside its named sub-agents), summed by model as
    ``queries.agent_groups`` sums the named ones: the agents table then adds up to the run."""
    groups: dict[str | None, dict] = {}
    for row in rows:
        if row["agent"] is not None:
            continue
        group = groups.setdefault(
            row["model"],
            {"agent": "", "model": row["model"], "calls": 0, "usage": {}, "unknown": {}, "cache_write_1h": 0},
        )
        group["calls"] += 1
        for name, value in row["usage"].items():
            group["usage"][name] = _add(group["usage"].get(name), value)
            if value is None:
                group["unknown"][name] = group["unknown"].get(name, 0) + 1
        group["cache_write_1h"] += limits.one_hour_tokens(row["usage_raw"] or {})
    return list(groups.values())


def packet(items: Sequence[Mapping[str, Any]] | None) -> dict | None:
    """The messages a call starts from and their tokens (None: the call's content was not captured)."""
    if not items:
        return None
    handed = [item for item in items if item.get("kind") in PACKET_KINDS]
    tokens = [item.get("tokens") for item in handed]
    return {"messages": len(handed), "tokens": None if None in tokens else sum(tokens)}


def invocations(rows: Sequence[Mapping[str, Any]], first_items: Mapping[str, Sequence], prices) -> list[dict]:
    """Each agent invocation: its agent, parent, how it was entered, its calls, usage, cost and peak
    window, and for a child the packet its first call started from.

    ``rows``: the run's calls in seq order (``queries.agent_rows``); ``first_items``: the items of each
    invocation's first call, by invocation id; ``prices``: model -> ``Price`` or None."""
    found: dict[str, dict] = {}
    for row in rows:
        if not row["invocation"]:
            continue
        usage = row["usage"]
        invocation = found.setdefault(
            row["invocation"],
            {
                "id": row["invocation"],
                "agent": row["agent"],
                "parent": row["parent"],
                "entered": row["entered"],
                "depth": row["depth"],
                "seqs": [],
                "prompt_total": None,
                "output": None,
                "peak_window": None,
                "cost_usd": 0.0,
            },
        )
        invocation["seqs"].append(row["seq"])
        invocation["prompt_total"] = _add(invocation["prompt_total"], usage["prompt_total"])
        invocation["output"] = _add(invocation["output"], usage["output"])
        if usage["prompt_total"] is not None:
            invocation["peak_window"] = max(invocation["peak_window"] or 0, usage["prompt_total"])
        cost = _cost(usage, row["model"], prices, limits.one_hour_tokens(row["usage_raw"]))
        previous = invocation["cost_usd"]
        invocation["cost_usd"] = None if cost is None or previous is None else round(previous + cost, 6)
    for invocation in found.values():
        child = invocation["entered"] != "root"
        invocation["packet"] = packet(first_items.get(invocation["id"])) if child else None
    return list(found.values())


def handoffs(result: Mapping[str, Any]) -> list[dict]:
    """Each boundary crossed: from which invocation to which, how, and the packet handed over."""
    names = {invocation["id"]: invocation["agent"] for invocation in result["invocations"]}
    # A parent whose calls are in another run (or whose span has not arrived) is named by its id.
    return [
        {
            "from": names.get(invocation["parent"]) or invocation["parent"],
            "to": invocation["agent"],
            "entered": invocation["entered"],
            "first_seq": invocation["seqs"][0],
            "packet": invocation["packet"],
        }
        for invocation in result["invocations"]
        if invocation["parent"]
    ]


class AgentsPanel(Panel):
    """The session's agents: who made which calls, cost and window per agent, and the handoffs."""

    slug = "agents"
    title = "Agents"

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries

        return queries.agent_rows(run)

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        named = agent_totals(data["groups"], data["prices"])
        unnamed = agent_totals(unnamed_groups(data["rows"]), data["prices"]) if named else []
        result = {
            "agents": named + unnamed,
            "invocations": invocations(data["rows"], data["first_items"], data["prices"]),
        }
        result["handoffs"] = handoffs(result)
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        count = sum(1 for agent in result["agents"] if agent["name"])  # "no agent named" is not one
        return words.counted(count, "agent")
