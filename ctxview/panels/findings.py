"""The findings timeline: every finding at its call, grouped by type with the type's explanation and fix."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxview.panels import help, palette
from ctxview.panels.plot import base_layout, config, plot_text

# The timeline draws at most this many markers; the groups below it always count every finding.
MAX_MARKERS = 3000


def _label(finding: Mapping[str, Any]) -> str:
    parts = [finding["type"]]
    if finding.get("item_id"):
        parts.append(str(finding["item_id"]))
    if finding.get("cause"):
        parts.append(str(finding["cause"]))
    evidence = finding.get("evidence") or {}
    if finding["type"] == "unknown_tool_called" and evidence.get("tool"):
        parts.append(f"tool {evidence['tool']}")
    if evidence.get("reason"):
        parts.append(f"reason {evidence['reason']}")
    return " · ".join(parts)


def grouped(findings: Sequence[Mapping[str, Any]]) -> dict:
    """Findings grouped by type (most severe first), each with its explanation, fix and calls."""
    groups: dict[str, dict] = {}
    for finding in findings:
        group = groups.setdefault(
            finding["type"],
            {
                "type": finding["type"],
                "severity": finding["severity"],
                "help": help.finding_help(finding["type"]),
                "findings": [],
            },
        )
        if help.SEVERITY_ORDER.get(finding["severity"], 3) < help.SEVERITY_ORDER.get(group["severity"], 3):
            group["severity"] = finding["severity"]
        group["findings"].append({**finding, "label": _label(finding)})
    ordered = sorted(groups.values(), key=lambda g: (help.SEVERITY_ORDER.get(g["severity"], 3), g["type"]))
    for group in ordered:
        group["count"] = len(group["findings"])
        group["fixes"] = sorted({finding["fix"] for finding in group["findings"] if finding.get("fix")})
    timed = [finding for finding in findings if finding.get("call_seq") is not None]
    return {
        "groups": ordered,
        "total": len(findings),
        "run_level": [finding for finding in findings if finding.get("call_seq") is None],
        "timed": timed[:MAX_MARKERS],
        "timed_total": len(timed),
    }


def figure(result: Mapping[str, Any]) -> dict:
    """One row per finding type, a marker per finding at its call, coloured by severity."""
    data = []
    for severity in ("error", "warning", "info"):
        points = [finding for finding in result["timed"] if finding["severity"] == severity]
        if not points:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": severity,
                "x": [finding["call_seq"] for finding in points],
                "y": [finding["type"] for finding in points],
                "customdata": [finding.get("url") for finding in points],
                "hovertext": [plot_text(f"call {f['call_seq']}: {_label(f)}") for f in points],
                "hovertemplate": "%{hovertext}<extra></extra>",
                "marker": {"color": palette.SEVERITY[severity], "size": 10, "symbol": "diamond"},
            }
        )
    types = sorted({finding["type"] for finding in result["timed"]})
    layout = base_layout()
    layout["height"] = max(180, 60 + 28 * len(types))
    layout["hovermode"] = "closest"
    layout["margin"] = {**layout["margin"], "l": 170}
    layout["xaxis"] = {"title": {"text": "call"}, "rangemode": "tozero"}
    layout["yaxis"] = {"type": "category", "categoryorder": "array", "categoryarray": types}
    layout["legend"] = {**layout["legend"], "y": -0.5 if len(types) < 3 else -0.3}
    return {"data": data, "layout": layout, "config": config()}


class FindingsPanel:
    """Findings over the run: a timeline and the list by type with explanations and fixes."""

    slug = "findings"
    title = "Findings"
    template = "panels/findings.html"
    help = help.CHARTS["findings"]

    def params(self, query: Mapping[str, str]) -> dict:
        return {}

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview.panels import load

        return {"findings": load.findings(run)}

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        result = grouped(data["findings"])
        result["figure"] = figure(result) if result["timed"] else None
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        return f"{result['total']} findings"
