"""What ``ctxview check`` writes: a table for the terminal, a Markdown summary for CI pages, JUnit XML
(one test case per rule and run). No Django here.
"""

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

from ctxview.check.rules import Outcome, breaks, hit_rate, window


def run_row(run: Mapping) -> dict:
    """A run's line of the summary: calls, turns, hit rate, peak window, breaks by cause, findings."""
    data = run["run"]
    causes: dict[str, int] = {}
    for call in breaks(run):
        causes[call["cache"]["cause"]] = causes.get(call["cache"]["cause"], 0) + 1
    windows = [size for size in (window(call) for call in run["calls"]) if size is not None]
    rate = hit_rate(run)
    return {
        "run": data["key"],
        "service": data.get("service") or "",
        "calls": str(len(run["calls"])),
        "turns": str(data.get("turns") or 0),
        "hit rate": f"{rate:.1%}" if rate is not None else "unknown",
        "peak window": f"{max(windows):,}" if windows else "unknown",
        "breaks": ", ".join(f"{cause} {count}" for cause, count in sorted(causes.items())) or "none",
        "findings": str(len(run["findings"])),
    }


def table(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """Rows of the same columns, aligned under their names."""
    if not rows:
        return []
    columns = list(rows[0])
    widths = {name: max(len(name), *(len(row[name]) for row in rows)) for name in columns}
    line = "  ".join(name.ljust(widths[name]) for name in columns)
    lines = [line.rstrip(), "  ".join("-" * widths[name] for name in columns).rstrip()]
    lines += ["  ".join(row[name].ljust(widths[name]) for name in columns).rstrip() for row in rows]
    return lines


def runstable(runs: Sequence[Mapping]) -> list[str]:
    return table([run_row(run) for run in runs])


def verdict(outcomes: Sequence[Outcome]) -> str:
    failed = sum(not outcome.passed for outcome in outcomes)
    if not outcomes:
        return "no rules given: nothing was checked (see ctxview check --help)"
    if failed:
        return (
            f"FAILED: {failed} of {len(outcomes)} rules failed"
            if len(outcomes) > 1
            else "FAILED: the rule failed"
        )
    return f"passed: {len(outcomes)} rules hold" if len(outcomes) > 1 else "passed: the rule holds"


def text(runs: Sequence[Mapping], outcomes: Sequence[Outcome]) -> str:
    """The terminal's report: the runs, the rules, then each failure with its calls and items."""
    lines = runstable(runs) + [""]
    lines += table(
        [
            {
                "result": "ok" if outcome.passed else "FAIL",
                "rule": outcome.rule,
                "run": outcome.run,
                "": outcome.message if not outcome.passed else "",
            }
            for outcome in outcomes
        ]
    )
    for outcome in outcomes:
        if not outcome.passed:
            lines += ["", f"FAIL {outcome.rule} in run {outcome.run}: {outcome.message}"]
            lines += [f"  {detail}" for detail in outcome.details]
    lines += ["", verdict(outcomes)]
    return "\n".join(lines) + "\n"


def _cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def markdown(runs: Sequence[Mapping], outcomes: Sequence[Outcome]) -> str:
    """A summary for a CI page (GitHub's step summary, a merge request comment)."""
    lines = ["## ctxview check", "", f"**{verdict(outcomes)}**", ""]
    rows = [run_row(run) for run in runs]
    if rows:
        lines += ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
        lines += ["| " + " | ".join(_cell(value) for value in row.values()) + " |" for row in rows]
        lines.append("")
    if outcomes:
        lines += ["| result | rule | run | |", "|---|---|---|---|"]
        for outcome in outcomes:
            result = "ok" if outcome.passed else "**FAIL**"
            lines.append(
                f"| {result} | {_cell(outcome.rule)} | `{_cell(outcome.run)}` | "
                f"{_cell(outcome.message if not outcome.passed else '')} |"
            )
        lines.append("")
    for outcome in outcomes:
        if not outcome.passed:
            lines += [f"### {outcome.rule} failed in `{outcome.run}`", "", outcome.message, ""]
            lines += [f"- {detail}" for detail in outcome.details]
            lines.append("")
    return "\n".join(lines)


def junit(outcomes: Sequence[Outcome]) -> bytes:
    """JUnit XML: a test suite per run, a test case per rule, a failure with the calls and items."""
    suites = ET.Element("testsuites", name="ctxview check")
    by_run: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        by_run.setdefault(outcome.run, []).append(outcome)
    for run, cases in by_run.items():
        failures = sum(not case.passed for case in cases)
        suite = ET.SubElement(
            suites, "testsuite", name=f"ctxview check: {run}", tests=str(len(cases)), failures=str(failures)
        )
        for case in cases:
            element = ET.SubElement(suite, "testcase", classname=f"ctxview.check.{run}", name=case.rule)
            if not case.passed:
                failure = ET.SubElement(element, "failure", message=case.message, type="ctxview.check")
                failure.text = "\n".join([case.message, *case.details])
    suites.set("tests", str(len(outcomes)))
    suites.set("failures", str(sum(not outcome.passed for outcome in outcomes)))
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
