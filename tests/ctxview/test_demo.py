"""The demo: four stories through the SDK, the real exporter and the live server, shown by the API and UI."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from contextlib import closing
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxview import demo
from ctxview.demo import cli
from ctxview.management.commands.demo import Command as DemoCommand
from ingest.keys import project_for_key
from ingest.models import Call, IngestKey, Project, Run
from tests import otel, services
from tests.cli import view


@pytest.fixture(scope="module")
def story_calls():
    return {story.RUN_ID: story for story in demo.STORIES}


def test_the_demo_sends_four_runs_that_the_api_and_the_ui_show(live_server, client, alice, project, key):
    out = StringIO()
    call_command("demo", url=live_server.url, key=key, stdout=out)
    assert "sent the demo run demo-incident-turn-40: 57 calls" in out.getvalue()

    runs = {run.key: run for run in Run.objects.filter(project=project, key__startswith="demo-")}
    assert {key: (run.call_count, run.turn_count) for key, run in runs.items()} == {
        "demo-incident-turn-40": (57, 40),
        "demo-migration-200-files": (80, 3),
        "demo-order-service-timeout": (24, 10),
        "demo-research-brief": (6, 2),
    }
    body = client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert {run["key"] for run in body["runs"]} >= set(runs)
    client.force_login(alice)
    page = client.get(f"/projects/{project.slug}/runs/").content.decode()
    assert all(run_key in page for run_key in runs)

    incident = runs["demo-incident-turn-40"]
    calls = list(Call.objects.filter(run=incident).order_by("seq"))
    assert all(call.manifest_source == "explicit" and not call.manifest_error for call in calls)
    # The turn-19 fact is in the window from turn 19 to turn 22, then excluded by the sliding window
    # (the last 12 messages).
    with_fact = sorted(
        {call.turn for call in calls if any(i["id"] == "fact:affected-shard" for i in call.items)}
    )
    assert with_fact == list(range(19, 23))
    dropped = [call for call in calls if any(e["id"] == "fact:affected-shard" for e in call.excluded)]
    assert dropped[0].turn == 23
    assert {e["reason"] for call in dropped for e in call.excluded if e["id"] == "fact:affected-shard"} == {
        "sliding_window"
    }
    # The agent asks three times for a tool that is not in its catalogue.
    read_log = [call.turn for call in calls for tool in call.tool_calls if tool["name"] == "read_log"]
    assert read_log == [33, 35, 38]
    assert all("read_log" not in call.tool_definitions for call in calls)
    # The standing rule of turn 2 is a user message: it leaves the window at turn 6; the agent restates
    # its employee number every 7 turns, and the answer of turn 37 is still in the last window.
    with_rule = sorted(
        {call.turn for call in calls if any(i["id"] == "rule:ticket-owner" for i in call.items)}
    )
    assert with_rule == list(range(2, 6))
    assert "msg:t37:answer" in {i["id"] for i in calls[-1].items}
    assert not any(i.get("pinned") for call in calls for i in call.items)
    # Usage follows the prefix-cache model: the totals add up on every call.
    assert all(call.uncached + call.cache_write + call.cache_read == call.prompt_total for call in calls)


def test_the_demo_sends_a_run_per_coding_cli_recording(live_server, project, key):
    out = StringIO()
    call_command("demo", url=live_server.url, key=key, stdout=out)
    for name in cli.RECORDINGS:
        recording = view.load(name)
        run = Run.objects.get(project=project, key=cli.session_of(recording))
        assert f"sent the coding CLI recording {name} ({run.key})" in out.getvalue()
        assert (run.call_count, run.turn_count) == (len(view.model_requests(recording)), 2)
        assert run.analysed_seq == run.call_count
    claude = Run.objects.get(project=project, agent_name="claude-code")
    assert claude.calls.filter(agent_name="general-purpose").count() == 2
    assert all(call.items for call in claude.calls.all())


def findings(run) -> list[tuple]:
    return list(run.findings.order_by("call_seq", "type").values_list("call_seq", "type", "item_id", "cause"))


def test_the_analyses_find_what_each_story_tells(live_server, client, project, key):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    runs = {run.key: run for run in Run.objects.filter(project=project)}
    for run in runs.values():
        assert run.analysed_seq == run.call_count

    incident = runs["demo-incident-turn-40"]
    # The first call of each turn (later assignments win: the calls go from last to first).
    seq_of_turn = {call.turn: call.seq for call in Call.objects.filter(run=incident).order_by("-seq")}
    found = findings(incident)
    # The turn-19 fact leaves the window at turn 23's first call, the turn-2 rule at turn 5's second
    # (its tool call and result push it out), both excluded by the sliding window.
    dropped = {row[2]: row[0] for row in found if row[1] == "fact_dropped"}
    assert dropped == {"rule:ticket-owner": seq_of_turn[5] + 1, "fact:affected-shard": seq_of_turn[23]}
    assert [row[0] for row in found if row[1] == "unknown_tool_called"] == [
        seq_of_turn[33],
        seq_of_turn[35],
        seq_of_turn[38],
    ]
    assert "unused_tools" in {row[1] for row in found if row[0] is None}
    assert {row[3] for row in found if row[1] == "cache_invalidated"} <= {"history_rewritten", "ttl_expired"}
    assert not any(
        row[1] in ("pinned_dropped", "conflicting_versions", "invisible_invalidator") for row in found
    )

    migration = findings(runs["demo-migration-200-files"])
    breaks = {row[0]: (row[2], row[3]) for row in migration if row[1] == "cache_invalidated"}
    assert breaks[30][0] == "system:prompt"
    assert breaks[60] == ("tool:read_file", "key_order")
    assert [row[:3] for row in migration if row[1] == "conflicting_versions"] == [
        (45, "conflicting_versions", "file:src/api/billing.ts@v1")
    ]
    migration_run = client.get(
        f"/api/v1/runs/{runs['demo-migration-200-files'].id}/calls?after_seq=30&limit=1",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    ).json()["calls"][0]
    assert migration_run["cache"]["cause"] == "volatile_system_prompt"
    assert migration_run["cache"]["invalidator_item_id"] == "system:prompt"

    timeout = findings(runs["demo-order-service-timeout"])
    types = {row[1]: row for row in timeout}
    assert types["superseded_included"][2] == "plan@v1"
    assert types["lost_in_middle"][2] == "rule:public-api"
    assert not any(row[1] in ("fact_dropped", "pinned_dropped", "unknown_tool_called") for row in timeout)


def test_the_item_lifecycle_of_the_dropped_fact(live_server, client, project, key):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    run = Run.objects.get(project=project, key="demo-incident-turn-40")
    body = client.get(
        f"/api/v1/runs/{run.id}/items/fact:affected-shard", HTTP_AUTHORIZATION=f"Bearer {key}"
    ).json()
    turn_of = dict(Call.objects.filter(run=run).values_list("seq", "turn"))
    assert turn_of[body["first_seq"]] == 19
    assert turn_of[body["last_seq"]] == 22
    assert body["left"][0]["reason"] == "sliding_window"
    response = client.get(f"/api/v1/runs/{run.id}/items/no-such-item", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 404


def test_make_demo_serves_otlp_grpc_too_and_prints_both_endpoints(tmp_path):
    """``manage.py demo`` as `make demo` runs it, embedded, with the gRPC port taken by someone else."""
    env = {
        name: value for name, value in os.environ.items() if name not in ("DATABASE_URL", "CELERY_BROKER_URL")
    }
    env["CTXVIEW_DATA_DIR"] = str(tmp_path)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=services.ROOT, env=env, check=True
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        services.artifact("demo.log").unlink(missing_ok=True)  # the test reads what this run prints
        web_port = services.free_port()
        demo_process = services.Process(
            "demo", [sys.executable, "manage.py", "demo", "--port", str(web_port),
                     "--grpc-port", str(busy)], env,
        )  # fmt: skip
        try:
            services.wait_for(
                lambda: "Ctrl-C stops the servers" in demo_process.log(), 300, "the demo to start"
            )
            output = demo_process.log()
            assert f"port {busy} is taken: OTLP/gRPC listens on 127.0.0.1:" in output
            endpoints = re.findall(r"OTEL_EXPORTER_OTLP_ENDPOINT=(\S+)", output)
            assert endpoints[0].startswith("http://127.0.0.1:") and len(endpoints) == 2
            assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in output
            key = re.search(r"ingest key of the demo project: (\S+)", output).group(1)

            spans = otel.agent_spans(calls=1)
            exporter = OTLPSpanExporter(
                endpoint=endpoints[1], headers=(("authorization", f"Bearer {key}"),), timeout=10
            )
            assert exporter.export(spans) == SpanExportResult.SUCCESS
            exporter.shutdown()
            with closing(sqlite3.connect(tmp_path / "ctxview.sqlite3", timeout=20)) as database:
                stored = database.execute(
                    "SELECT count(*) FROM ingest_span WHERE trace_id = ?",
                    (format(spans[0].context.trace_id, "032x"),),
                ).fetchone()[0]
            assert stored == 2
        finally:
            # As a process manager or `kill` stops it (Ctrl-C's SIGINT takes the same way out): both
            # servers stop within 10 s (issue 36) and give their ports back.
            demo_process.popen.send_signal(signal.SIGTERM)
            try:
                demo_process.popen.wait(timeout=10)
            finally:
                demo_process.stop()
    grpc_port = int(endpoints[1].rsplit(":", 1)[1])
    for port in (web_port, grpc_port):
        with socket.socket() as again:
            # As the next server binds (SO_REUSEADDR: closed connections may linger in TIME_WAIT): it fails
            # while any process still listens there.
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", port))


def test_a_busy_port_says_how_to_start_the_demo_elsewhere(db):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError) as refused:
            call_command("demo", port=port, stdout=StringIO())
    assert str(refused.value) == (
        f"port {port} is in use (another ctxview?): start the demo on another port: "
        "make demo PORT=8001 (or python manage.py demo --port 8001)"
    )
    assert not Project.objects.filter(slug="demo").exists()  # refused before anything was created


def test_each_demo_start_replaces_the_demo_key_instead_of_adding_one(db):
    first = DemoCommand()._demo_project_key()
    second = DemoCommand()._demo_project_key()
    active = IngestKey.objects.filter(project__slug="demo", revoked_at__isnull=True)
    assert active.count() == 1
    assert project_for_key(second).slug == "demo" and project_for_key(first) is None


def test_the_research_story_has_two_agents_the_packet_and_exactly_one_real_break(
    live_server, client, project, key
):
    """A lead delegating to a researcher: no break at either switch, the one real break inside the lead
    (its instructions changed between the turns), and the packet the researcher started from."""
    from ctxview.demo import research

    others = {story.RUN_ID for story in demo.STORIES if story is not research}
    assert demo.send(live_server.url, key, skip=others) == {research.RUN_ID: 6}
    run = Run.objects.get(project=project, key=research.RUN_ID)
    assert (run.call_count, run.turn_count, run.analysed_seq) == (6, 2, 6)
    calls = list(run.calls.order_by("seq"))
    assert [call.agent_name for call in calls] == [
        "lead",
        "researcher",
        "researcher",
        "researcher",
        "lead",
        "lead",
    ]
    assert [call.agent_entry for call in calls[1:4]] == ["agent_as_tool"] * 3
    # Each agent's calls read what its own previous call wrote: the switches are no breaks. The lead's
    # changed instructions come right after its one short tool: its last call reads nothing.
    assert [call.cache_read > 0 for call in calls] == [False, False, True, True, True, False]
    assert findings(run) == [(6, "cache_invalidated", "system:lead", "system_changed")]

    detail = client.get(f"/api/v1/runs/{run.id}", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    agents = {agent["name"]: agent for agent in detail["agents"]}
    assert {name: agent["calls"] for name, agent in agents.items()} == {"lead": 3, "researcher": 3}
    assert all(agent["cost_usd"] > 0 for agent in agents.values())
    researcher = next(entry for entry in detail["invocations"] if entry["agent"] == "researcher")
    assert (researcher["entered"], researcher["seqs"]) == ("agent_as_tool", [2, 3, 4])
    assert researcher["packet"]["messages"] == 1 and researcher["packet"]["tokens"] > 0


def test_a_story_piece_takes_the_vocabulary_items_fields_and_no_other():
    from dataclasses import fields

    from ctxcore import vocabulary
    from ctxview.demo.recorder import PIECE_FIELDS, Piece

    assert set(PIECE_FIELDS) < {field.name for field in fields(vocabulary.Item)}
    piece = Piece("m1", "message", "conversation", {"text": "hi"}, role="user", origin_turn=2)
    assert (piece.role, piece.origin_turn, piece.trust, piece.supersedes) == ("user", 2, None, ())
    with pytest.raises(TypeError, match="no field colour"):
        Piece("m2", "message", "conversation", "hi", colour="red")
