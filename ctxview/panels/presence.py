"""The item presence map: items (rows, grouped by bucket) x calls (columns), coloured by mode.

Bounded for long runs: the server builds a sparse index of the run once (``index``), then ships at most
``MAX_COLUMNS`` columns (consecutive calls binned together) and ``rows`` rows (the most telling items
first: pinned items, facts and rules, items named by findings, then the last call's window, then items
ever excluded), so a 1,000-call run with thousands of items sends the browser a bounded number of cells,
never every cell.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ctxcore.vocabulary import STANDING_KINDS
from ctxview.panels.base import Panel
from ctxview.params import BadParameter, int_param
from ctxview.shapes import help, palette, words
from ctxview.shapes.plot import base_layout, config, count_axis, plot_text

MAX_COLUMNS = 200
ROWS = 120
MAX_ROWS = 1200
LABEL_CHARS = 44

# Cell codes: 0 absent (drawn as a gap), 1-4 included by mode, 5 excluded.
MODE_CODES = {"verbatim": 1, "excerpt": 2, "summary": 3, "reference": 4}
EXCLUDED = 5
CODE_NAMES = {1: "verbatim", 2: "excerpt", 3: "summary", 4: "reference", 5: "excluded"}
# A probe's cells (its own trace and colours): where the call held it; absent is drawn, not a gap.
PROBE_CODES = {how: code for code, how in enumerate(palette.PROBE_HOW, start=1)}
PROBE_MARK = "◆ "


def index(manifests: Iterable[tuple[int, int | None, Sequence[Mapping], Sequence[Mapping], str]]) -> dict:
    """One pass over the run's manifests: per item, its bucket, kind and state at each call (sparse)."""
    seqs: list[int] = []
    turns: list[int | None] = []
    items: dict[str, dict] = {}
    derived = 0
    for column, (seq, turn, included, excluded, source) in enumerate(manifests):
        seqs.append(seq)
        turns.append(turn)
        derived += source != "explicit"
        for stored in included:
            entry = items.get(stored["id"])
            if entry is None:
                entry = items[stored["id"]] = {
                    "bucket": stored.get("bucket") or "other",
                    "kind": stored.get("kind") or "",
                    "pinned": False,
                    "first": column,
                    "included": False,
                    "states": {},
                    "reasons": {},
                }
            elif not entry["included"]:
                entry["bucket"] = stored.get("bucket") or entry["bucket"]  # first inclusion decides
            entry["included"] = True
            entry["pinned"] = entry["pinned"] or bool(stored.get("pinned"))
            entry["states"][column] = MODE_CODES.get(stored.get("mode") or "verbatim", 1)
        for stored in excluded:
            entry = items.get(stored["id"])
            if entry is None:
                entry = items[stored["id"]] = {
                    "bucket": "other",
                    "kind": stored.get("kind") or "",
                    "pinned": False,
                    "first": column,
                    "included": False,
                    "states": {},
                    "reasons": {},
                }
            entry["states"].setdefault(column, EXCLUDED)
            entry["reasons"][column] = str(stored.get("reason") or "")
    return {"seqs": seqs, "turns": turns, "items": items, "derived": derived}


def _priority(item_id: str, entry: Mapping, flagged: set[str], last: int) -> int:
    if entry["pinned"] or entry["kind"] in ("fact", "rule") or item_id in flagged:
        return 0
    if entry["states"].get(last, EXCLUDED) != EXCLUDED:
        return 1  # in the window now
    if entry["reasons"]:
        return 2
    return 3


def presence(
    built: Mapping[str, Any],
    flagged: Iterable[str] = (),
    rows: int = ROWS,
    query: str = "",
    max_columns: int = MAX_COLUMNS,
    item_base: str = "",
    probes: Mapping[str, Any] | None = None,
) -> dict:
    """The rows and binned columns to draw, from ``index``; ``flagged`` ids (from findings) come first;
    ``probes`` (``ctxview.replay.probe_presence``) adds a row per probe above the items."""
    flagged = set(flagged)
    seqs = built["seqs"]
    candidates = [
        (item_id, entry)
        for item_id, entry in built["items"].items()
        if not query or query.lower() in item_id.lower()
    ]
    last = len(seqs) - 1
    chosen = sorted(
        candidates, key=lambda pair: (_priority(pair[0], pair[1], flagged, last), pair[1]["first"])
    )
    order = {bucket: index for index, bucket in enumerate(palette.BUCKET_ORDER)}

    def drawn_order(pair: tuple[str, Mapping]) -> tuple[int, int]:
        return (order.get(pair[1]["bucket"], len(order)), pair[1]["first"])

    shown_ids = {item_id for item_id, _ in chosen[:rows]}
    chosen = sorted(chosen[:rows], key=drawn_order)
    # Where the hidden items would sit among the drawn rows: a marker says how many are left out there.
    gaps: dict[int, int] = {}
    drawn = 0
    for item_id, _entry in sorted(candidates, key=drawn_order):
        if item_id in shown_ids:
            drawn += 1
        else:
            gaps[drawn] = gaps.get(drawn, 0) + 1

    size = max(1, -(-len(seqs) // max_columns))
    columns = [(start, min(start + size, len(seqs)) - 1) for start in range(0, len(seqs), size)]
    x = [seqs[last] for _, last in columns]
    seen_labels: set[str] = set()
    probe_rows = _probe_rows(probes, seqs, columns, seen_labels) if probes else []
    z: list[list[int | None]] = []
    # Hover text as an index into a table of distinct labels: a few dozen strings instead of one per cell
    # (plots.js expands it before drawing).
    cells: list[list[int]] = []
    table: dict[str, int] = {}
    labels, links, groups = [], [], []
    for item_id, entry in chosen:
        row_z: list[int | None] = [None] * len(columns)
        row_cells = [-1] * len(columns)
        by_column: dict[int, list[int]] = {}
        for column in entry["states"]:
            by_column.setdefault(column // size, []).append(column)
        for bin_index, members in by_column.items():
            members.sort()
            start, last = columns[bin_index]
            code = entry["states"].get(last) or entry["states"][members[-1]]
            row_z[bin_index] = code
            label = _cell_text(entry, members, start, last, seqs, code)
            row_cells[bin_index] = table.setdefault(label, len(table))
        z.append(row_z)
        cells.append(row_cells)
        label = _label(item_id, seen_labels)
        labels.append(label)
        links.append(f"{item_base}{quote(item_id, safe='')}")
        if not groups or groups[-1]["bucket"] != entry["bucket"]:
            groups.append({"bucket": entry["bucket"], "start": len(labels) - 1, "count": 0})
        groups[-1]["count"] += 1
    return {
        "x": x,
        "labels": labels,
        "z": z,
        "cells": cells,
        "cell_labels": list(table),
        "links": links,
        "groups": groups,
        "bin": size,
        "columns": len(columns),
        "calls": len(seqs),
        "rows": len(chosen),
        "total_items": len(built["items"]),
        "matching_items": len(candidates),
        "more": len(candidates) > len(chosen),
        "hidden": len(candidates) - len(chosen),
        "gaps": [{"before": before, "count": count} for before, count in sorted(gaps.items())],
        "derived": built["derived"],
        "query": query,
        "probe_rows": probe_rows,
    }


def _probe_label(probe: Mapping) -> str:
    value = probe["value"]
    return {"text": f"“{value}”", "regex": f"/{value}/"}.get(probe["kind"], value)


def _probe_rows(
    probes: Mapping[str, Any], seqs: list[int], columns: list[tuple[int, int]], seen: set[str]
) -> list[dict]:
    """Per probe, where each column's (last) call held it, from the recorded replay's places."""
    rows = []
    for number, probe in enumerate(probes["probes"]):
        z: list[int | None] = []
        text: list[str] = []
        for start, last in columns:
            places = probes["calls"].get(seqs[last])
            if not places:
                z.append(None)
                text.append("")
                continue
            place = places[number]
            z.append(PROBE_CODES[place["how"]])
            calls = (
                f"call {seqs[last]}" if start == last else f"calls {seqs[start]}–{seqs[last]}, at the last"
            )
            where = f" in {place['item_id']}" if place["item_id"] else ""
            text.append(plot_text(f"{calls}: {place['how']}{where}"))
        label = _probe_label(probe)
        rows.append({"label": _label(PROBE_MARK + label, seen), "z": z, "text": text})
    return rows


def _label(item_id: str, seen: set[str]) -> str:
    label = item_id if len(item_id) <= LABEL_CHARS else item_id[: LABEL_CHARS - 1] + "…"
    base, number = label, 2
    while label in seen:  # plotly merges equal category labels: keep truncated ids apart
        label = f"{base} ({number})"
        number += 1
    seen.add(label)
    return plot_text(label)


def _cell_text(entry: Mapping, members: list[int], start: int, last: int, seqs: list[int], code: int) -> str:
    if start == last:
        state = CODE_NAMES[code]
        reason = entry["reasons"].get(last)
        return plot_text(state + (f" ({reason})" if reason else ""))
    included = sum(1 for column in members if entry["states"][column] != EXCLUDED)
    reasons = sorted({entry["reasons"][column] for column in members if column in entry["reasons"]})
    parts = [f"calls {seqs[start]}–{seqs[last]}: in {included} of {last - start + 1}"]
    if reasons:
        parts.append("excluded: " + ", ".join(reason or "no reason" for reason in reasons))
    return plot_text("; ".join(parts))


def figure(result: Mapping[str, Any]) -> dict:
    """A heatmap with discrete colours per mode, excluded in red, absent cells left as gaps."""
    steps = [palette.MODES[name] for name in ("verbatim", "excerpt", "summary", "reference")]
    steps.append(palette.EXCLUDED)
    colorscale = []
    for index, colour in enumerate(steps):
        colorscale += [[index / len(steps), colour], [(index + 1) / len(steps), colour]]
    probe_rows = result.get("probe_rows") or []
    rows = len(result["labels"]) + len(probe_rows)
    data = [
        {
            "type": "heatmap",
            "x": result["x"],
            "y": result["labels"],
            "z": [[cell or 0 for cell in row] for row in result["z"]],  # plots.js: 0 -> gap
            "zmin": 0.5,
            "zmax": 5.5,
            "colorscale": colorscale,
            "showscale": False,
            "xgap": 1 if result["columns"] <= 120 else 0,
            "ygap": 1,
            "hoverongaps": False,
            "hovertemplate": "%{y}<br>call %{x}: %{text}<extra></extra>"
            if result["bin"] == 1
            else "%{y}<br>%{text}<extra></extra>",
        }
    ]
    # data[0] stays the items' trace (plots.js expands its cells); the probes' rows are drawn above.
    if probe_rows:
        data.append(_probe_trace(result, probe_rows))
    layout = base_layout()
    layout["height"] = 90 + (15 if rows <= 60 else 11) * max(rows, 4)
    layout["margin"] = {"l": 280, "r": 110, "t": 10, "b": 40}
    layout["hovermode"] = "closest"
    layout["xaxis"] = {**count_axis(result["x"], "call"), "side": "bottom"}
    layout["yaxis"] = {
        "autorange": "reversed",
        "tickfont": {"size": 10 if rows <= 60 else 9},
        "automargin": False,
    }
    shapes, annotations = [], []
    if probe_rows:
        # The probes on an axis of their own above the items' (two heatmaps on one category axis do not
        # draw), which also sets them apart as a band.
        share = min(0.5, (len(probe_rows) + 0.5) / (rows + 0.5))
        layout["yaxis"]["domain"] = [0, 1 - share]
        layout["yaxis2"] = {**layout["yaxis"], "domain": [1 - share + 6 / layout["height"], 1]}
        annotations.append({**_group_label("probes", (len(probe_rows) - 1) / 2, "#127a3c"), "yref": "y2"})
    for group in result["groups"]:
        if group["start"]:
            shapes.append(
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "yref": "y",
                    "y0": group["start"] - 0.5,
                    "y1": group["start"] - 0.5,
                    "line": {"color": "#1d2330", "width": 1},
                }
            )
        middle = group["start"] + (group["count"] - 1) / 2
        colour = palette.BUCKETS.get(group["bucket"], "#6b7385")
        annotations.append(_group_label(group["bucket"], middle, colour))
    for gap in result.get("gaps") or ():
        y = gap["before"] - 0.5
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": y,
                "y1": y,
                "line": {"color": palette.EXCLUDED, "width": 1.5, "dash": "dot"},
            }
        )
        annotations.append(
            {
                "xref": "paper",
                "x": 0,
                "xanchor": "left",
                "yref": "y",
                "y": y,
                "text": f"⋯ {gap['count']:,} hidden",
                "showarrow": False,
                "bgcolor": "#ffffff",
                "font": {"size": 9, "color": palette.EXCLUDED},
            }
        )
    layout["shapes"] = shapes
    layout["annotations"] = annotations
    return {
        "data": data,
        "layout": layout,
        "config": config(),
        "links": {"rows": result["links"]},
        "cells": {"labels": result["cell_labels"], "index": result["cells"]},
    }


def _group_label(name: str, y: float, colour: str) -> dict:
    return {
        "xref": "paper",
        "x": 1.01,
        "xanchor": "left",
        "yref": "y",
        "y": y,
        "text": plot_text(name),
        "showarrow": False,
        "font": {"size": 11, "color": colour},
    }


def _probe_trace(result: Mapping[str, Any], probe_rows: list[dict]) -> dict:
    colours = list(palette.PROBE_HOW.values())
    colorscale = []
    for index, colour in enumerate(colours):
        colorscale += [[index / len(colours), colour], [(index + 1) / len(colours), colour]]
    return {
        "type": "heatmap",
        "name": "probes",
        "yaxis": "y2",
        "x": result["x"],
        "y": [row["label"] for row in probe_rows],
        "z": [row["z"] for row in probe_rows],
        "text": [row["text"] for row in probe_rows],
        "zmin": 0.5,
        "zmax": len(colours) + 0.5,
        "colorscale": colorscale,
        "showscale": False,
        "xgap": 1 if result["columns"] <= 120 else 0,
        "ygap": 3,  # thicker gaps than the items' rows: the probes read as their own band
        "hoverongaps": False,
        "hovertemplate": "probe %{y}<br>%{text}<extra></extra>",
    }


class PresencePanel(Panel):
    """Which items were in which calls, how, and why the excluded ones were left out."""

    slug = "presence"
    title = "Item presence"

    def params(self, query: Mapping[str, str]) -> dict:
        rows = int_param(query, "rows", ROWS, 1, MAX_ROWS)
        text = (query.get("q") or "").strip()
        if len(text) > 200:
            raise BadParameter("q (the item filter) must be at most 200 characters")
        return {"rows": rows, "q": text}

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries, replay

        built = queries.presence_index(run, index)
        # The recorded replay follows the probes only when the run has some: facts, rules or added ones.
        followed = any(entry["kind"] in STANDING_KINDS for entry in built["items"].values())
        return {
            "index": built,
            "flagged": queries.flagged_items(run),
            "item_base": queries.item_url(run.id, ""),
            "probes": replay.probe_presence(run) if followed or run.probes.exists() else None,
        }

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        result = presence(
            data["index"],
            data["flagged"],
            params["rows"],
            params["q"],
            item_base=data["item_base"],
            probes=data.get("probes"),
        )
        result["figure"] = figure(result) if result["rows"] else None
        probes = data.get("probes") or {}
        # What the request's time budget cut short, and stored probes RE2 cannot run: both read unknown.
        result["probes_partial"] = probes.get("partial") or []
        result["probes_refused"] = sum(bool(entry.get("refused")) for entry in probes.get("probes", ()))
        # One step shows every hidden item when few are left out, up to the ceiling.
        result["next_rows"] = min(MAX_ROWS, params["rows"] + max(ROWS, result["hidden"]))
        result["next_shows"] = min(result["hidden"], result["next_rows"] - result["rows"])
        result["modes"] = [
            {"name": name, "colour_class": f"mode-{name}", "help": help.MODES[name]} for name in MODE_CODES
        ]
        result["probe_hows"] = [{"name": name, "colour_class": f"probe-how-{name}"} for name in PROBE_CODES]
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        return words.counted(result["total_items"], "item")
