"""The findings timeline: every finding at its call, grouped by type with the type's explanation and fix;
and the review marks (notes, bookmarks) people left on the run's calls, in their own rows."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ctxcore import catalogue
from ctxview.panels.base import Panel
from ctxview.shapes import palette, words
from ctxview.shapes.plot import base_layout, config, count_axis, plot_text

# The timeline draws at most this many markers; the groups below it always count every finding.
MAX_MARKERS = 3000
# ... and at most this many marks per review row (one mark per call); the panel says how many it left off.
MAX_MARKS = 500
# A run-level note list this long at most, under the timeline (the review page has them all).
MAX_LISTED = 20
# Notes are quoted this far: in a mark's hover, and in the list of run-level notes.
HOVER_CHARS = 120
LIST_CHARS = 300
# Notes quoted in one mark's hover (a call can have several).
NOTES_PER_MARK = 3
# The review rows' names on the y axis, drawn above the finding types.
NOTES_ROW = "notes"
BOOKMARKS_ROW = "bookmarks"


# Findings that mark where a run of cache breaks of one cause starts; each break is an occurrence.
INVISIBLE_CAUSE = "invisible"
BREAK_TYPES = {"cache_invalidated", "invisible_invalidator"}


def _break_type(cause: str | None) -> str:
    return "invisible_invalidator" if cause == INVISIBLE_CAUSE else "cache_invalidated"


def occurrences(findings: Sequence[Mapping[str, Any]], breaks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The calls where a cache-break finding's condition held: each break (``{seq, cause, url}``) goes to
    the latest finding of its type and cause at or before its call. Other findings occur once, at their
    call. Returns the findings with ``occurrences`` (a list of breaks; empty for other types)."""
    starts: dict[tuple[str, str | None], list[int]] = {}
    for index, finding in enumerate(findings):
        if finding["type"] in BREAK_TYPES and finding.get("call_seq") is not None:
            starts.setdefault((finding["type"], finding.get("cause")), []).append(index)
    held: dict[int, list[Mapping[str, Any]]] = {}
    for entry in breaks:
        candidates = starts.get((_break_type(entry.get("cause")), entry.get("cause")), [])
        before = [index for index in candidates if findings[index]["call_seq"] <= entry["seq"]]
        if before:
            owner = max(before, key=lambda index: findings[index]["call_seq"])
            held.setdefault(owner, []).append(entry)
    return [{**finding, "occurrences": held.get(index, [])} for index, finding in enumerate(findings)]


def _rank(severity: str) -> int:
    return catalogue.SEVERITY_ORDER.get(severity, len(catalogue.SEVERITIES))


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
                "help": catalogue.finding_help(finding["type"]),
                "findings": [],
            },
        )
        if catalogue.SEVERITY_ORDER.get(finding["severity"], 3) < catalogue.SEVERITY_ORDER.get(
            group["severity"], 3
        ):
            group["severity"] = finding["severity"]
        group["findings"].append({**finding, "label": _label(finding)})
    ordered = sorted(
        groups.values(), key=lambda g: (catalogue.SEVERITY_ORDER.get(g["severity"], 3), g["type"])
    )
    for group in ordered:
        group["count"] = len(group["findings"])
        # A finding marks where a condition starts; for cache breaks, every break it covers is counted too.
        group["occurrences"] = sum(
            len(finding.get("occurrences") or ()) or 1 for finding in group["findings"]
        )
        group["fixes"] = sorted({finding["fix"] for finding in group["findings"] if finding.get("fix")})
    timed = [finding for finding in findings if finding.get("call_seq") is not None]
    repeats = [
        {"seq": entry["seq"], "url": entry.get("url"), "type": finding["type"], "start": finding["call_seq"]}
        for finding in timed
        for entry in finding.get("occurrences") or ()
        if entry["seq"] != finding["call_seq"]
    ]
    return {
        "groups": ordered,
        "total": len(findings),
        "run_level": [finding for finding in findings if finding.get("call_seq") is None],
        "timed": timed[:MAX_MARKERS],
        "timed_total": len(timed),
        "repeats": repeats[:MAX_MARKERS],
    }


def _quote(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "unknown time"


def _byline(author: str | None, moment: datetime | None) -> str:
    return f"{author or 'someone'} · {_when(moment)}"


def marks(notes: Sequence[Mapping[str, Any]], bookmarks: Sequence[Mapping[str, Any]]) -> dict:
    """Notes and bookmarks as the timeline draws them: one mark per call with its hover text (escaped for
    plotly), at most ``MAX_MARKS`` per row; notes on no numbered call (the run, an item) as a list.

    A note is ``{call_seq, url, item_id, item_url, author, created_at, body}`` (``body`` may be only the
    start of the note); a bookmark ``{call_seq, url, author, created_at}``.
    """
    by_call: dict[int, list[Mapping[str, Any]]] = {}
    listed = []
    for note in notes:
        if note.get("call_seq") is None:
            listed.append(note)
        else:
            by_call.setdefault(note["call_seq"], []).append(note)
    note_marks = []
    for seq in sorted(by_call)[:MAX_MARKS]:
        on_call = by_call[seq]
        lines = [f"call {seq}: {len(on_call)} note{'s' if len(on_call) > 1 else ''}"]
        for note in on_call[:NOTES_PER_MARK]:
            about = f" · item {note['item_id']}" if note.get("item_id") else ""
            lines.append(
                plot_text(f"{_byline(note.get('author'), note.get('created_at'))}{about}: ")
                + plot_text(_quote(note.get("body") or "", HOVER_CHARS))
            )
        if len(on_call) > NOTES_PER_MARK:
            lines.append(f"and {len(on_call) - NOTES_PER_MARK} more on the review page")
        # Each line was escaped on its own: the only markup left is the <br> between them.
        note_marks.append({"seq": seq, "url": on_call[0].get("url"), "hover": "<br>".join(lines)})
    drawn_notes = sum(len(by_call[mark["seq"]]) for mark in note_marks)
    timed_bookmarks = sorted(
        (bookmark for bookmark in bookmarks if bookmark.get("call_seq") is not None),
        key=lambda bookmark: bookmark["call_seq"],
    )
    bookmark_marks = [
        {
            "seq": bookmark["call_seq"],
            "url": bookmark.get("url"),
            "hover": plot_text(
                f"call {bookmark['call_seq']}: bookmarked by "
                f"{_byline(bookmark.get('author'), bookmark.get('created_at'))}"
            ),
        }
        for bookmark in timed_bookmarks[:MAX_MARKS]
    ]
    return {
        "notes": note_marks,
        "bookmarks": bookmark_marks,
        "note_total": len(notes),
        "notes_left_off": sum(len(on_call) for on_call in by_call.values()) - drawn_notes,
        "bookmark_total": len(timed_bookmarks),
        "bookmarks_left_off": len(timed_bookmarks) - len(bookmark_marks),
        "listed": [
            {
                "author": note.get("author") or "someone",
                "when": _when(note.get("created_at")),
                "item_id": note.get("item_id") or None,
                "item_url": note.get("item_url"),
                "url": note.get("url"),
                "text": _quote(note.get("body") or "", LIST_CHARS),
            }
            for note in listed[:MAX_LISTED]
        ],
        "listed_total": len(listed),
    }


def _mark_trace(name: str, row: str, points: Sequence[Mapping[str, Any]], colour: str, symbol: str) -> dict:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": [point["seq"] for point in points],
        "y": [row] * len(points),
        "customdata": [point["url"] for point in points],
        "hovertext": [point["hover"] for point in points],
        "hovertemplate": "%{hovertext}<br>click to open the call<extra></extra>",
        "marker": {"color": colour, "size": 11, "symbol": symbol, "line": {"color": "#ffffff", "width": 1}},
    }


def figure(result: Mapping[str, Any]) -> dict:
    """One row per finding type, a marker per finding at its call, coloured by severity; above them a row
    of notes and a row of bookmarks (``result["marks"]``, from ``marks``) when the run has any."""
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
    repeats = result.get("repeats") or []
    if repeats:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "occurrence",
                "x": [entry["seq"] for entry in repeats],
                "y": [entry["type"] for entry in repeats],
                "customdata": [entry["url"] for entry in repeats],
                "hovertext": [
                    f"call {entry['seq']}: again, as since call {entry['start']}" for entry in repeats
                ],
                "hovertemplate": "%{hovertext}<br>click to open the call<extra></extra>",
                "marker": {"color": palette.SEVERITY["warning"], "size": 7, "symbol": "diamond-open"},
            }
        )
    types = sorted({finding["type"] for finding in result["timed"]})
    drawn = [trace_x for trace in data for trace_x in trace["x"]]
    review = result.get("marks") or {}
    # A category array lists its rows bottom up: the review rows go on top, clear of the findings.
    if review.get("bookmarks"):
        data.append(_mark_trace("bookmark", BOOKMARKS_ROW, review["bookmarks"], palette.BOOKMARK, "star"))
        types.append(BOOKMARKS_ROW)
    if review.get("notes"):
        data.append(_mark_trace("note", NOTES_ROW, review["notes"], palette.NOTE, "square"))
        types.append(NOTES_ROW)
    layout = base_layout()
    layout["height"] = max(180, 60 + 28 * len(types))
    layout["hovermode"] = "closest"
    layout["margin"] = {**layout["margin"], "l": 170}
    # The run's calls, so the timeline lines up with the charts above it.
    layout["xaxis"] = count_axis([1, result.get("calls") or 1] + drawn, "call")
    layout["yaxis"] = {"type": "category", "categoryorder": "array", "categoryarray": types}
    layout["legend"] = {**layout["legend"], "y": -0.5 if len(types) < 3 else -0.3}
    return {"data": data, "layout": layout, "config": config()}


class FindingsPanel(Panel):
    """Findings over the run: a timeline and the list by type with explanations and fixes."""

    slug = "findings"
    title = "Findings"

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries

        breaks = [
            {"seq": row["seq"], "cause": row["cache"].get("cause"), "url": row["url"]}
            for row in queries.series(run)
            if (row["cache"] or {}).get("broke")
        ]
        return {
            "findings": queries.findings(run),
            "breaks": breaks,
            "calls": run.call_count,
            **queries.review_marks(run),
        }

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        result = grouped(occurrences(data["findings"], data.get("breaks", ())))
        result["marks"] = marks(data.get("notes", ()), data.get("bookmarks", ()))
        result["calls"] = data.get("calls")
        drawn = result["timed"] or result["marks"]["notes"] or result["marks"]["bookmarks"]
        result["figure"] = figure(result) if drawn else None
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        return words.counted(result["total"], "finding")
