"""``ctxview check --server``: a run read through a live server's read API, checked by the same rules; and
the server's runs are the ones the check's own engine makes of the same spans."""

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxview.check import engine, inputs
from ctxview.cli import main
from ctxview.models import Label
from ingest.models import RawBatch, Run


def send(live_server, key: str, spans) -> Run:
    """The spans through the real OTLP/HTTP exporter to the live server, 7 a request (each a batch of
    its own; tasks run as the server stores them)."""
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {key}"}
    )
    for start in range(0, len(spans), 7):
        assert exporter.export(spans[start : start + 7]) == SpanExportResult.SUCCESS
    exporter.shutdown()
    return Run.objects.get(key="demo-migration-200-files")


def shape(run: dict) -> dict:
    """What the rules read of a run: its calls' numbering, agents and cache causes, and its findings."""
    return {
        "key": run["run"]["key"],
        "turns": run["run"]["turns"],
        "accounting": run["run"]["accounting"],
        "calls": [
            (call["seq"], call["turn"], call["agent"], call["usage"], call["cache"], call["buckets"])
            for call in run["calls"]
        ],
        "findings": [(row["type"], row["call_seq"], row["item_id"], row["cause"]) for row in run["findings"]],
    }


def test_a_server_run_fails_as_its_spans_do_locally(
    live_server, key, broken_spans, broken_pb, tmp_path, capsys
):
    run = send(live_server, key, broken_spans)
    junit = tmp_path / "server.xml"
    code = main(
        ["check", "--server", live_server.url, "--run", str(run.id), "--token", key]
        + ["--fail-on-cause", "volatile_system_prompt", "--junit", str(junit)]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "  call 31 (and 28 more calls): cause volatile_system_prompt, item system:prompt" in out
    assert 'name="no cache break (volatile_system_prompt)"' in junit.read_text()

    # The server's run (12 batches) and the check's (its engine, over the same spans in one file) are the
    # same.
    from ctxview.check.server import read_runs

    assert RawBatch.objects.count() == 12
    served = read_runs(live_server.url, key, [run.id], [])
    local = engine.analyse(inputs.read_paths([str(broken_pb)]))
    assert len(served) == len(local) == 1
    assert shape(served[0]) == shape(local[0])
    assert main(["check", str(broken_pb), "--fail-on-cause", "volatile_system_prompt"]) == 1
    assert capsys.readouterr().out == out


def test_runs_by_label_and_the_servers_refusals(live_server, key, project, fixed_spans, capsys):
    run = send(live_server, key, fixed_spans)
    Label.objects.create(project=project, run=run, name="nightly")
    args = ["check", "--server", live_server.url, "--token", key, "--fail-on-cause", "volatile_system_prompt"]
    assert main([*args, "--label", "nightly"]) == 0
    out = capsys.readouterr().out
    assert "ok      no cache break (volatile_system_prompt)  demo-migration-200-files" in out

    missing = run.id + 1000
    assert main([*args, "--run", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"ctxview check: {live_server.url}/api/v1/runs/{missing}: the server answered 404 (no such run)\n"
    )
    assert main([*args, "--label", "weekly"]) == 2
    assert capsys.readouterr().err == f"ctxview check: {live_server.url}: no run is labelled 'weekly'\n"
    assert main([*args[:3], "--token", "cvk_wrong", "--run", str(run.id)]) == 2
    assert "the server answered 401 (invalid or revoked key)" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--run", "--label"])
def test_server_mode_needs_a_server_and_takes_no_paths(capsys, flag, tmp_path):
    assert main(["check", flag, "1" if flag == "--run" else "x"]) == 2
    assert "give --server URL" in capsys.readouterr().err
    assert main(["check", str(tmp_path), "--server", "http://127.0.0.1:9", "--run", "1"]) == 2
    assert "give either PATHs or --server, not both" in capsys.readouterr().err


def test_calls_are_read_page_after_page_once_all_are_analysed(live_server, key, broken_spans, monkeypatch):
    from ctxview.check import server

    run = send(live_server, key, broken_spans)
    monkeypatch.setattr(server, "PAGE", 7)
    served = server.read_runs(live_server.url, key, [run.id], [])[0]
    assert [call["seq"] for call in served["calls"]] == list(range(1, 81))
    # Compared as data: PostgreSQL's jsonb keeps its own key order.
    assert served["run"]["accounting"]["cache_breaks"]["by_cause"]["volatile_system_prompt"] == {
        "count": 29,
        "tokens_rewritten": 132934,
        "cost_usd": 0.458627,
    }

    Run.objects.filter(id=run.id).update(analysed_seq=50)  # the server's analysis lagging behind
    with pytest.raises(inputs.Unusable, match=f"run {run.id} is still being analysed \\(50 of 80 calls\\)"):
        server.read_runs(live_server.url, key, [run.id], [])
