"""``ctxview check``: check the context of agent runs in CI, from OTLP files or a server's run.

Exit status: 0 when every rule holds, 1 when one fails (each failure printed with its cause, call and
item), 2 when the input or the rules cannot be used (a message names the file and what is wrong).
"""

import argparse
import os
import sys
import traceback
from pathlib import Path

from ctxview.check import report, rules
from ctxview.check.inputs import Unusable

OK, FAILED, UNUSABLE = 0, 1, 2
TOKEN_ENV = "CTXVIEW_TOKEN"

DESCRIPTION = """\
Check the context of agent runs: the same normalisation and analyses as the server, over OTLP files
(protobuf or JSON request bodies, gzipped or not, JSON lines of an OTel file exporter, or folders of
them) or over a run read from a server. Exit 0 when every rule holds, 1 when one fails, 2 on unusable
input."""

EPILOG = """\
rules may also come from a TOML file (--config): fail_on_cause = ["volatile_system_prompt"],
fail_on_finding, min_hit_rate, max_window, require_pinned, baseline, write_baseline, junit, markdown;
at the top level, under [check], or under [tool.ctxview.check] of a pyproject.toml. Flags add to the
file's lists and replace its other values."""


def add_parser(subcommands) -> None:
    parser = subcommands.add_parser(
        "check",
        help="check agent runs against rules (for CI)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="OTLP files or folders")
    given = parser.add_argument_group("rules")
    given.add_argument(
        "--fail-on-cause",
        action="append",
        metavar="NAME",
        help="fail on a cache break of this cause (see ctxcore.catalogue), or of any cause with 'any'",
    )
    given.add_argument(
        "--fail-on-finding", action="append", metavar="TYPE", help="fail on a finding of this type, or 'any'"
    )
    given.add_argument("--min-hit-rate", metavar="X", help="fail below this cache hit rate (0..1 or 60%%)")
    given.add_argument(
        "--max-window", type=int, metavar="N", help="fail when a call's window exceeds N tokens"
    )
    given.add_argument(
        "--require-pinned",
        action="store_true",
        default=None,
        help="fail when a pinned item leaves the window (a pinned_dropped finding)",
    )
    given.add_argument("--baseline", metavar="FILE", help="fail on a cache-break cause the baseline lacks")
    given.add_argument("--config", metavar="FILE", help="rules and outputs from a TOML file")
    outputs = parser.add_argument_group("outputs")
    outputs.add_argument("--write-baseline", metavar="FILE", help="write the causes of these runs here")
    outputs.add_argument("--junit", metavar="FILE", help="write JUnit XML: a test case per rule and run")
    outputs.add_argument(
        "--markdown", metavar="FILE", help="write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    remote = parser.add_argument_group("a run on a server, instead of files")
    remote.add_argument("--server", metavar="URL", help="a ctxview server's base URL")
    remote.add_argument("--run", action="append", type=int, metavar="ID", help="the run's id (repeatable)")
    remote.add_argument("--label", action="append", metavar="L", help="every run with this label")
    remote.add_argument(
        "--token", metavar="TOKEN", help=f"an API token or the project's ingest key (default: ${TOKEN_ENV})"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
        checked = rules.rules_from(settings, f"{args.config} and the flags" if args.config else "the flags")
        runs = _runs(args)
    except (Unusable, rules.BadRules) as exc:
        print(f"ctxview check: {exc}", file=sys.stderr)
        return UNUSABLE
    except Exception:  # a fault of the check itself: never taken for a rule that failed (exit 1)
        traceback.print_exc()
        print("ctxview check: internal error (above); nothing was checked", file=sys.stderr)
        return UNUSABLE
    outcomes = rules.evaluate(runs, checked)
    sys.stdout.write(report.text(runs, outcomes))
    try:
        _write_outputs(settings, runs, outcomes)
    except OSError as exc:
        print(f"ctxview check: {exc.filename}: cannot be written ({exc.strerror})", file=sys.stderr)
        return UNUSABLE
    return FAILED if any(not outcome.passed for outcome in outcomes) else OK


def _settings(args: argparse.Namespace) -> dict:
    """The config file's settings, with the flags added (lists) or put in their place (the rest)."""
    settings = rules.read_config(args.config) if args.config else {}
    for name in ("fail_on_cause", "fail_on_finding"):
        settings[name] = [*(settings.get(name) or []), *(getattr(args, name) or [])]
    for name in rules.CONFIG_KEYS:
        if name not in ("fail_on_cause", "fail_on_finding") and getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    return settings


def _runs(args: argparse.Namespace) -> list[dict]:
    if args.server:
        if args.paths:
            raise Unusable("give either PATHs or --server, not both")
        if not (args.run or args.label):
            raise Unusable("--server needs --run ID or --label L")
        from ctxview.check.server import read_runs

        token = args.token or os.environ.get(TOKEN_ENV)
        return read_runs(args.server, token, args.run or [], args.label or [])
    if args.run or args.label:
        raise Unusable("--run and --label read a run from a server: give --server URL")
    if not args.paths:
        raise Unusable("nothing to check: give OTLP files or folders, or --server URL --run ID")
    from ctxview.check import engine
    from ctxview.check.inputs import read_paths

    exports = read_paths(args.paths)
    for export in exports:
        if export.rejected:
            print(f"ctxview check: {export.source}: {export.problem}", file=sys.stderr)
    runs = engine.analyse(exports)
    if not runs:
        raise Unusable(f"{', '.join(args.paths)}: no model call found in the spans")
    return runs


def _write_outputs(settings: dict, runs: list[dict], outcomes: list) -> None:
    if settings.get("write_baseline"):
        rules.write_baseline(settings["write_baseline"], runs)
    if settings.get("junit"):
        Path(settings["junit"]).write_bytes(report.junit(outcomes))
    if settings.get("markdown"):
        Path(settings["markdown"]).write_text(report.markdown(runs, outcomes))
