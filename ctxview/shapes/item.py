"""One item across the run: a strip of where it sat in each window, and the story of its lifecycle."""

from collections.abc import Mapping
from typing import Any

from ctxview.shapes import help, palette
from ctxview.shapes.plot import base_layout, config, count_axis, plot_text


def story(
    lifecycle: Mapping[str, Any], turns: Mapping[int, int | None], call_urls: Mapping[int, str]
) -> dict:
    """``analysis.item_lifecycle`` with turns, urls, stretches of consecutive calls and the versions seen."""
    included = [
        {**entry, "turn": turns.get(entry["seq"]), "url": call_urls.get(entry["seq"])}
        for entry in lifecycle["included"]
    ]
    excluded = [
        {
            **entry,
            "turn": turns.get(entry["seq"]),
            "url": call_urls.get(entry["seq"]),
            "reason_help": help.reason_help(entry["reason"]),
        }
        for entry in lifecycle["excluded"]
    ]
    left = [
        {
            **entry,
            "turn": turns.get(entry["seq"]),
            "url": call_urls.get(entry["seq"]),
            "reason_help": help.reason_help(entry["reason"]),
        }
        for entry in lifecycle["left"]
    ]
    spans: list[dict] = []
    previous_seq = None
    for entry in included:
        if (
            spans
            and previous_seq is not None
            and entry["seq"] == previous_seq + 1
            and spans[-1]["mode"] == entry["mode"]
        ):
            spans[-1]["last"] = entry["seq"]
            spans[-1]["last_turn"] = entry["turn"]
            spans[-1]["calls"] += 1
        else:
            spans.append(
                {
                    "first": entry["seq"],
                    "last": entry["seq"],
                    "first_turn": entry["turn"],
                    "last_turn": entry["turn"],
                    "mode": entry["mode"],
                    "version": entry["version"],
                    "calls": 1,
                }
            )
        previous_seq = entry["seq"]
    versions = list(dict.fromkeys(entry["version"] for entry in included if entry["version"] is not None))
    return {
        **lifecycle,
        "included": included,
        "excluded": excluded,
        "left": left,
        "spans": spans,
        "versions": versions,
        "first_turn": turns.get(lifecycle["first_seq"]) if lifecycle["first_seq"] else None,
        "last_turn": turns.get(lifecycle["last_seq"]) if lifecycle["last_seq"] else None,
    }


def figure(result: Mapping[str, Any]) -> dict:
    """Position in the window (0 = start, 1 = end) per call, coloured by mode; exclusions below the axis."""
    data = []
    for mode, colour in palette.MODES.items():
        points = [entry for entry in result["included"] if entry["mode"] == mode]
        if not points:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": mode,
                "x": [entry["seq"] for entry in points],
                "y": [entry["position_share"] for entry in points],
                "customdata": [entry["url"] for entry in points],
                "hovertext": [
                    plot_text(
                        f"call {entry['seq']} (turn {entry['turn']}): position {entry['position']}, "
                        f"{entry['tokens'] if entry['tokens'] is not None else '?'} tokens"
                        + (f", version {entry['version']}" if entry["version"] else "")
                    )
                    for entry in points
                ],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "marker": {"color": colour, "size": 7},
            }
        )
    if result["excluded"]:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "excluded",
                "x": [entry["seq"] for entry in result["excluded"]],
                "y": [-0.08] * len(result["excluded"]),
                "customdata": [entry["url"] for entry in result["excluded"]],
                "hovertext": [
                    plot_text(f"call {entry['seq']} (turn {entry['turn']}): excluded, {entry['reason']}")
                    for entry in result["excluded"]
                ],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "marker": {"color": palette.EXCLUDED, "size": 7, "symbol": "x"},
            }
        )
    layout = base_layout()
    layout["height"] = 260
    layout["hovermode"] = "closest"
    layout["xaxis"] = count_axis([value for trace in data for value in trace.get("x") or ()], "call")
    layout["yaxis"] = {
        "title": {"text": "position in window"},
        "range": [-0.15, 1.05],
        "tickvals": [0, 0.2, 0.5, 0.8, 1],
        "ticktext": ["start", "20 %", "middle", "80 %", "end"],
    }
    layout["shapes"] = [
        {
            "type": "rect",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "yref": "y",
            "y0": 0.2,
            "y1": 0.8,
            "fillcolor": "rgba(208, 138, 26, 0.08)",
            "line": {"width": 0},
            "layer": "below",
        }
    ]
    return {"data": data, "layout": layout, "config": config()}
