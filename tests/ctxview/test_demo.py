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
    # The turn-19 fact is in the window from turn 19 to turn 30, then excluded by the sliding window.
    with_fact = sorted(
        {call.turn for call in calls if any(i["id"] == "fact:affected-shard" for i in call.items)}
    )
    assert with_fact == list(range(19, 31))
    dropped = [call for call in calls if any(e["id"] == "fact:affected-shard" for e in call.excluded)]
    assert dropped[0].turn == 31
    assert {e["reason"] for call in dropped for e in call.excluded if e["id"] == "fact:affected-shard"} == {
        "sliding_window"
    }
    # The agent asks three times for a tool that is not in its catalogue.
    read_log = [call.turn for call in calls for tool in call.tool_calls if tool["name"] == "read_log"]
    assert read_log == [33, 35, 38]
    assert all("read_log" not in call.tool_definitions for call in calls)
    # The pinned rule from turn 2 is in every window after it.
    assert all(
        any(i["id"] == "rule:ticket-owner" and i.get("pinned") for i in call.items) for call in calls[3:]
    )
    # Usage follows the prefix-cache model: the totals add up on every call.
    assert all(call.uncached + call.cache_write + call.cache_read == call.prompt_total for call in calls)
