"""``ctxview check`` on OTLP files (issue 34): the console script, its rules, exit statuses and outputs."""

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ctxview.cli import main
from tests.check import stories

CTXVIEW = Path(sys.executable).parent / "ctxview"  # the console script pip installed
VOLATILE = ["--fail-on-cause", "volatile_system_prompt"]


def ctxview(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CTXVIEW), *map(str, args)], capture_output=True, text=True, timeout=120)


def test_fails_on_the_demo_migration_run_naming_the_volatile_system_prompt(broken_pb):
    done = ctxview("check", broken_pb, *VOLATILE)
    assert done.returncode == 1, done.stderr
    assert "FAIL    no cache break (volatile_system_prompt)  demo-migration-200-files" in done.stdout
    # The cause, the first call that broke and the item, and the bytes that changed (the clock).
    assert (
        "call 31 (and 28 more calls): cause volatile_system_prompt, item system:prompt, 132,934 tokens "
        "written again, $0.4586; at byte 38: '5:48' became '6:10'"
    ) in done.stdout
    assert done.stdout.rstrip().endswith("FAILED: the rule failed")


def test_passes_on_the_fixed_migration_run(fixed_json):
    done = ctxview("check", fixed_json, *VOLATILE, "--fail-on-cause", "key_order")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok      no cache break (volatile_system_prompt)" in done.stdout
    assert done.stdout.rstrip().endswith("passed: 2 rules hold")


def test_gzipped_protobuf_json_lines_and_a_folder_give_the_same_runs(
    broken_spans, broken_pb, broken_jsonl, tmp_path
):
    folder = tmp_path / "exports"
    folder.mkdir()
    # The spans in two files, exported 7 at a time (the runs' batches split differently).
    stories.write_json_lines(folder / "a.jsonl", broken_spans[:40], per_line=7)
    stories.write_protobuf(folder / "b.pb", broken_spans[40:], gzipped=False)
    (folder / "notes.txt").write_text("not an export: skipped")
    assert len(broken_jsonl.read_text().splitlines()) == 3  # 80 spans, 32 a line
    tables = []
    for path in (broken_pb, broken_jsonl, folder):
        done = ctxview("check", path, "--fail-on-cause", "any")
        assert done.returncode == 1, done.stderr
        tables.append(done.stdout)
    assert tables[0] == tables[1] == tables[2]
    assert "demo-migration-200-files  migration-agent  80     3      13.6%" in tables[0]
    assert "history_rewritten 19, key_order 21, system_changed 1, volatile_system_prompt 29" in tables[0]


def test_each_rule_names_what_fails(broken_pb, tmp_path):
    junit, markdown = tmp_path / "check.xml", tmp_path / "summary.md"
    done = ctxview(
        "check",
        broken_pb,
        *("--fail-on-finding", "stale_version", "--min-hit-rate", "50%", "--max-window", "5000"),
        *("--require-pinned", "--junit", junit, "--markdown", markdown),
    )
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "FAIL no finding (stale_version) in run demo-migration-200-files: 1 finding: first " in out
    assert "  call 46, item file:src/api/billing.ts@v1: stale_version, warning" in out
    assert "FAIL cache hit rate at least 50% in run demo-migration-200-files: the hit rate is 13.6%" in out
    assert "  call 31 (and 28 more calls): cause volatile_system_prompt, item system:prompt" in out
    assert (
        "FAIL window at most 5,000 tokens in run demo-migration-200-files: 36 calls over 5,000 tokens: first "
        "call 45, peak 5,677 at call 76"
    ) in out
    assert "  call 45 (turn 2): 5,656 tokens" in out
    assert "ok      pinned items in every call" in out

    # JUnit XML: a test case per rule and run, the failures with their calls and items.
    suites = ET.parse(junit).getroot()
    assert (suites.get("tests"), suites.get("failures")) == ("4", "3")
    cases = {case.get("name"): case for case in suites.iter("testcase")}
    assert list(cases) == [
        "no finding (stale_version)",
        "cache hit rate at least 50%",
        "window at most 5,000 tokens",
        "pinned items in every call",
    ]
    assert {case.get("classname") for case in cases.values()} == {"ctxview.check.demo-migration-200-files"}
    assert cases["pinned items in every call"].find("failure") is None
    failure = cases["no finding (stale_version)"].find("failure")
    assert failure.get("message").startswith("1 finding: first stale_version at call 46")
    assert "item file:src/api/billing.ts@v1" in failure.text

    summary = markdown.read_text()
    assert summary.startswith("## ctxview check\n\n**FAILED: 3 of 4 rules failed**")
    assert "| **FAIL** | cache hit rate at least 50% | `demo-migration-200-files` |" in summary
    assert "### window at most 5,000 tokens failed in `demo-migration-200-files`" in summary


def test_a_pinned_item_that_leaves_the_window_fails_require_pinned(tmp_path):
    path = stories.write_protobuf(tmp_path / "pinned.pb.gz", stories.pinned_rule_dropped())
    done = ctxview("check", path, "--require-pinned")
    assert done.returncode == 1, done.stderr
    assert (
        "FAIL pinned items in every call in run check-pinned: 1 pinned item dropped: first item "
        "rule:public-api at call 3\n  call 3: item rule:public-api dropped (budget)\n"
    ) in done.stdout
    # The other rules hold: the prompt is too short to be cached, so nothing breaks.
    assert ctxview("check", path, "--fail-on-cause", "any").returncode == 0


def test_rules_from_a_toml_file_and_flags_together(broken_pb, tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.ctxview.check]\nfail-on-cause = ["key_order"]\nmax_window = 100000\n')
    done = ctxview("check", broken_pb, "--config", config, *VOLATILE)
    assert done.returncode == 1, done.stderr
    assert "FAIL no cache break (key_order) in run demo-migration-200-files: 21 calls broke" in done.stdout
    assert "FAIL no cache break (volatile_system_prompt)" in done.stdout
    assert "ok      window at most 100,000 tokens" in done.stdout


def test_a_baseline_round_trip(broken_pb, fixed_json, tmp_path):
    baseline = tmp_path / "baseline.json"
    done = ctxview("check", fixed_json, "--write-baseline", baseline)
    assert done.returncode == 0, done.stderr
    written = json.loads(baseline.read_text())
    assert list(written["causes"]) == ["history_rewritten"]
    assert written["causes"]["history_rewritten"]["first"] == {
        "run": "demo-migration-200-files",
        "seq": 6,
        "item": "progress.md@v2",
    }

    assert ctxview("check", fixed_json, "--baseline", baseline).returncode == 0
    done = ctxview("check", broken_pb, "--baseline", baseline)
    assert done.returncode == 1
    assert (
        "FAIL no cause beyond the baseline in run demo-migration-200-files: new causes: key_order, "
        "system_changed, volatile_system_prompt (first at call 30)"
    ) in done.stdout
    assert "  call 31 (and 28 more calls): cause volatile_system_prompt, item system:prompt" in done.stdout


def run_check(capsys, *args) -> tuple[int, str]:
    code = main(["check", *map(str, args)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"\x0a\x05not a valid protobuf", "body is not a valid protobuf ExportTraceServiceRequest"),
        (b"\x1f\x8b\x08\x00garbage", "gzip body is truncated"),
    ],
)
def test_unusable_protobuf_is_exit_2_naming_the_file(capsys, tmp_path, content, message):
    path = tmp_path / "traces.pb"
    path.write_bytes(content)
    code, err = run_check(capsys, path, *VOLATILE)
    assert code == 2
    assert err.startswith(f"ctxview check: {path}: ")
    assert message in err


def test_a_bad_json_line_is_exit_2_naming_the_file_and_line(capsys, tmp_path, broken_jsonl):
    path = tmp_path / "traces.jsonl"
    path.write_text(broken_jsonl.read_text().splitlines()[0] + '\n{"resourceSpans": [{"scopeSpans": 7}]}\n')
    code, err = run_check(capsys, path, *VOLATILE)
    assert code == 2
    assert err.startswith(f"ctxview check: {path}:2: JSON body is not a valid ExportTraceServiceRequest")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.pb"], "ctxview check: missing.pb: no such file or folder"),
        (["--fail-on-cause", "volatile_prompt"], "the flags: unknown cause 'volatile_prompt'; known: any, "),
        (["--min-hit-rate", "1.5"], "min-hit-rate must be between 0 and 1 (or a percentage), not '1.5'"),
        (["--baseline", "missing.json"], "missing.json: the baseline cannot be read"),
        ([], "nothing to check: give OTLP files or folders, or --server URL --run ID"),
        (["--run", "3"], "--run and --label read a run from a server: give --server URL"),
    ],
)
def test_unusable_arguments_are_exit_2(capsys, args, message):
    code, err = run_check(capsys, *args)
    assert code == 2
    assert message in err


def test_a_config_with_an_unknown_setting_is_exit_2(capsys, tmp_path, fixed_json):
    config = tmp_path / "check.toml"
    config.write_text("fail_on_causes = ['key_order']\n")
    code, err = run_check(capsys, fixed_json, "--config", config)
    assert code == 2
    assert f"{config}: unknown setting 'fail_on_causes'" in err


def test_spans_the_receiver_would_reject_are_reported_and_the_rest_checked(capsys, tmp_path, fixed_json):
    document = json.loads(fixed_json.read_text())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["spanId"] = "not-hex"
    path = tmp_path / "one-bad.json"
    path.write_text(json.dumps(document))
    code = main(["check", str(path), *VOLATILE])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.err.startswith(f"ctxview check: {path}: rejected 1 of 80 spans; first: span 'chat ")
    assert "demo-migration-200-files  migration-agent  79     3" in captured.out


def test_spans_without_a_model_call_are_exit_2(capsys, tmp_path):
    from tests import otel

    path = stories.write_protobuf(tmp_path / "agent.pb", [otel.agent_spans(calls=1)[-1]])  # the agent span
    code, err = run_check(capsys, path, *VOLATILE)
    assert code == 2
    assert err == f"ctxview check: {path}: no model call found in the spans\n"
