"""Context composition over the run: tokens per bucket, turn by turn (or call by call), with the budget."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxview.panels.base import Panel
from ctxview.params import choice_param
from ctxview.shapes import palette
from ctxview.shapes.plot import axis, base_layout, config, count_axis, links, plot_text

# Above this many points per-call charts are binned (each point the largest window of its bin).
MAX_POINTS = 1500
# When the window never comes near the limit, the y axis fits the window instead of the budget.
OFF_SCALE = 0.25


# A run with fewer turns than this (and more calls than turns) opens per call: a per-turn chart of an
# 80-call run in 3 turns would draw 3 points.
FEW_TURNS = 6


def default_by(rows: Sequence[Mapping[str, Any]]) -> str:
    """``call`` for a run with few turns and more calls than turns, else ``turn``."""
    turns = {row["turn"] for row in rows if row.get("turn") is not None}
    return "call" if len(turns) < FEW_TURNS and len(rows) > len(turns) else "turn"


def composition(rows: Sequence[Mapping[str, Any]], by: str, explain_base: str) -> dict:
    """Bucket tokens per turn (the last call of each turn) or per call, with limit and reserved output.

    ``rows`` are ``queries.series`` rows; a turn's point opens ``explain_base`` followed by the turn.
    """
    analysed = [row for row in rows if row.get("buckets")]
    if by == "turn":
        last: dict[int, Mapping] = {}
        for row in analysed:
            if row["turn"] is not None:
                last[row["turn"]] = row
        points = [last[turn] for turn in sorted(last)]
        xs = [row["turn"] for row in points]
        links = [f"{explain_base}{row['turn']}" for row in points]
    else:
        points = _binned(analysed, MAX_POINTS)
        xs = [row["seq"] for row in points]
        links = [row["url"] for row in points]
    parts = {bucket: [] for bucket in palette.BUCKET_ORDER}
    limits, reserved, seqs, turns = [], [], [], []
    estimated = False
    for row in points:
        buckets = row["buckets"]
        for bucket in palette.BUCKET_ORDER:
            parts[bucket].append(buckets["parts"].get(bucket) or 0)
        estimated = estimated or bool(buckets.get("estimated"))
        budget = row.get("budget") or {}
        limits.append(budget.get("limit"))
        reserved.append(budget.get("reserved_output") or 0)
        seqs.append(row["seq"])
        turns.append(row["turn"])
    totals = [sum(parts[bucket][index] for bucket in parts) for index in range(len(points))]
    known_limits = [value for value in limits if value]
    return {
        "by": by,
        "x": xs,
        "seq": seqs,
        "turn": turns,
        "parts": {bucket: values for bucket, values in parts.items() if any(values)},
        "limit": limits,
        "reserved": reserved,
        "links": links,
        "peak": max(totals, default=0),
        "limit_max": max(known_limits, default=None),
        "estimated": estimated,
        "points": len(points),
        "calls": len(rows),
        "analysed": len(analysed),
    }


def _binned(rows: Sequence[Mapping], limit: int) -> list[Mapping]:
    """At most ``limit`` rows: each bin of consecutive calls is represented by its largest window."""
    if len(rows) <= limit:
        return list(rows)
    size = -(-len(rows) // limit)
    return [
        max(rows[start : start + size], key=lambda row: row["buckets"]["total"])
        for start in range(0, len(rows), size)
    ]


def figure(result: Mapping[str, Any], scale: str = "window") -> dict:
    """A stacked area per bucket, the limit line and the reserved-output band above ``limit - reserved``."""
    x = result["x"]
    label = "turn" if result["by"] == "turn" else "call"
    data: list[dict] = []
    for bucket, values in result["parts"].items():
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": bucket,
                **axis(x),
                "y": values,
                "stackgroup": "window",
                "line": {"width": 0.5, "color": palette.BUCKETS[bucket]},
                "fillcolor": palette.BUCKETS[bucket],
                "hovertemplate": f"{bucket}: %{{y:,}} tokens<extra></extra>",
            }
        )
    if result["limit_max"]:
        usable = [
            (limit - reserved) if limit else None
            for limit, reserved in zip(result["limit"], result["reserved"], strict=True)
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "limit − reserved output",
                **axis(x),
                "y": usable,
                "line": {"color": palette.BUDGET, "width": 1, "dash": "dot"},
                "hovertemplate": "usable for input: %{y:,}<extra></extra>",
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "reserved output",
                **axis(x),
                "y": result["limit"],
                "fill": "tonexty",
                "fillcolor": palette.RESERVED,
                "line": {"color": palette.BUDGET, "width": 1.5, "dash": "dash"},
                "hovertemplate": "limit: %{y:,}<extra></extra>",
            }
        )
    layout = base_layout()
    layout["hovermode"] = "x unified"
    layout["xaxis"] = count_axis(x, label)
    layout["yaxis"] = {"title": {"text": "tokens"}, "rangemode": "tozero", "separatethousands": True}
    peak, limit = result["peak"], result["limit_max"]
    if scale == "window" and limit and peak < OFF_SCALE * limit:
        layout["yaxis"]["range"] = [0, peak * 1.2 or 1]
        layout["annotations"] = [
            {  # at the top left: plotly's toolbar takes the top right on hover and covered it there
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": 1,
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 11, "color": "#6b7385"},
                "text": plot_text(
                    f"limit {limit:,} tokens is off the scale: the window peaks at {peak / limit:.0%} of it"
                ),
            }
        ]
    # A click anywhere on a turn (or call) opens it: one list of links for every band.
    return {"data": data, "layout": layout, "config": config(), "links": links(x, result["links"])}


class CompositionPanel(Panel):
    """Context composition per turn: stacked buckets, budget line and reserved output."""

    slug = "composition"
    title = "Context composition"

    def params(self, query: Mapping[str, str]) -> dict:
        return {
            "by": choice_param(query, "by", ("turn", "call"), ""),
            "scale": choice_param(query, "scale", ("window", "budget"), "window"),
        }

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries

        return {"rows": queries.series(run), "explain_base": queries.explain_url(run.id, "")}

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        by = params["by"] or default_by(data["rows"])
        result = composition(data["rows"], by, data["explain_base"])
        result["figure"] = figure(result, params["scale"])
        result.update(params, by=by)
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        return f"peak {result['peak']:,} tokens"
