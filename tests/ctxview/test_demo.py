"""The demo: three stories through the SDK, the real exporter and the live server, shown by the API and UI."""

from io import StringIO

import pytest
from django.core.management import call_command

from ctxview import demo
from ingest.models import Call, Run


@pytest.fixture(scope="module")
def story_calls():
    return {story.RUN_ID: story for story in demo.STORIES}


def test_the_demo_sends_three_runs_that_the_api_and_the_ui_show(live_server, client, alice, project, key):
    out = StringIO()
    call_command("demo", url=live_server.url, key=key, stdout=out)
    assert "sent the demo run demo-incident-turn-40: 57 calls" in out.getvalue()

    runs = {run.key: run for run in Run.objects.filter(project=project)}
    assert {key: (run.call_count, run.turn_count) for key, run in runs.items()} == {
        "demo-incident-turn-40": (57, 40),
        "demo-migration-200-files": (80, 3),
        "demo-order-service-timeout": (24, 10),
    }
    body = client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert {run["key"] for run in body["runs"]} == set(runs)
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
