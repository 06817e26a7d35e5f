"""The Replay page: the policies table, charts, one policy's window, and the probes form."""

import json
import re

import pytest
from django.test import Client

from ctxview import views_replay
from ctxview.models import Probe
from ingest.models import Membership
from tests import factories
from tests.ctxview import ui_data, ui_fixtures

inspect = ui_fixtures.inspect
stranger_client = ui_fixtures.stranger_client
viewer_client = ui_fixtures.viewer_client

HTMX = {"HTTP_HX_REQUEST": "true"}


def figure(response, name: str) -> dict:
    match = re.search(
        rf'<script id="{name}" type="application/json">(.*?)</script>', response.content.decode(), re.S
    )
    assert match, f"no {name} in the response"
    return json.loads(match.group(1))


def test_the_page_lists_the_policies_recorded_first_and_marks_the_cheapest_keeping_every_probe(
    viewer_client, inspect
):
    run = inspect.incident
    response = viewer_client.get(
        f"/runs/{run.id}/replay?policies=full,sliding_window:12,recorded,user_verbatim:4"
    )
    assert response.status_code == 200
    rows = response.context["rows"]
    assert [row["policy"] for row in rows] == ["recorded", "full", "sliding_window:12", "user_verbatim:4"]
    body = response.content.decode()
    best = re.search(r'<tr class="best-row" data-policy="([^"]+)"', body)
    assert best and best.group(1) == response.context["result"]["cheapest_keeping_all"] == "user_verbatim:4"
    assert "cheapest keeping every probe" in body
    for probe in ("fact:affected-shard", "rule:ticket-owner"):
        assert f'title="item probe">{probe}</th>' in body
    window = figure(response, "fig-replay-window")
    # The incident's agent kept a sliding window of 12: that policy's line is the recorded one, dashed.
    assert [trace["name"] for trace in window["data"]] == [
        "recorded",
        "full",
        "sliding_window:12 (same as recorded)",
        "user_verbatim:4",
    ]
    assert window["data"][0]["x"] == list(range(1, 41))
    cost = figure(response, "fig-replay-cost")
    assert sum(cost["data"][1]["y"]) == pytest.approx(rows[1]["cost_usd"], abs=1e-4)


def test_the_deltas_name_their_baseline_and_the_user_picks_another(viewer_client, inspect):
    run = inspect.incident
    base = f"/runs/{run.id}/replay?policies=recorded,full,sliding_window:12"
    body = viewer_client.get(base).content.decode()
    assert 'title="billed input against the baseline\'s">vs recorded</th>' in body
    choice = body.split('class="small baseline-choice"', 1)[1].split("</p>", 1)[0]
    assert (
        "<strong><code>recorded</code></strong>" in choice
        and '&amp;baseline=full"><code>full</code>' in choice
    )
    response = viewer_client.get(f"{base}&baseline=full")
    rows = {row["policy"]: row for row in response.context["rows"]}
    body = response.content.decode()
    assert ">vs full</th>" in body
    full_row = body.split('data-policy="full"', 1)[1].split("</tr>", 1)[0]
    assert '<span class="muted">baseline</span>' in full_row
    recorded_row = body.split('data-policy="recorded"', 1)[1].split("</tr>", 1)[0]
    share = round(rows["recorded"]["billed_input"] * 100 / rows["full"]["billed_input"])
    assert f'<td class="num">{share} %</td>' in recorded_row
    assert re.search(r'<td class="num">\$\d[\d,]*\.\d+</td>', recorded_row)  # money as everywhere else
    assert viewer_client.get(f"{base}&baseline=elide:2").status_code == 400  # not replayed here


def test_the_policies_table_scrolls_in_its_own_box(viewer_client, inspect):
    body = viewer_client.get(f"/runs/{inspect.incident.id}/replay").content.decode()
    assert '<div class="table-scroll">\n  <table class="grid replay-table">' in body


def test_a_policys_window_at_a_call_through_htmx(viewer_client, inspect):
    run = inspect.incident
    url = f"/runs/{run.id}/replay?policies=recorded,elide:4&policy=elide:4&seq=40"
    response = viewer_client.get(url, **HTMX, HTTP_HX_TARGET="window")
    assert response.status_code == 200
    body = response.content.decode()
    assert "<html" not in body and body.lstrip().startswith('<section class="card" id="window">')
    stubs = re.findall(r'<tr class="warn-row">(.*?)</tr>', body, re.S)
    assert stubs and all('<td class="num">12</td><td>stub <span' in row for row in stubs)
    assert "Window of <code>elide:4</code> at call 40" in body and "the recorded call 40" in body


def test_bad_input_is_a_400_that_says_why(viewer_client, inspect):
    run = inspect.incident
    for query, message in (
        ("policies=window:3", "unknown policy &#x27;window&#x27;"),
        ("at_turn=99", "at_turn must be between 1 and 40"),
        ("policy=full&seq=0", "seq must be between 1 and 57"),
    ):
        response = viewer_client.get(f"/runs/{run.id}/replay?{query}")
        assert response.status_code == 400 and message in response.content.decode(), query


def test_another_projects_run_is_a_404(stranger_client, inspect):
    assert stranger_client.get(f"/runs/{inspect.incident.id}/replay").status_code == 404


def test_the_run_page_links_to_its_replay(viewer_client, inspect):
    body = viewer_client.get(f"/runs/{inspect.incident.id}/").content.decode()
    assert f'href="/runs/{inspect.incident.id}/replay"' in body


def test_an_editor_adds_and_removes_a_probe_from_the_page(viewer_client, inspect):
    run = inspect.incident
    url = f"/runs/{run.id}/replay/probes"
    response = viewer_client.post(url, {"kind": "text", "value": "employee 4417"})
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/replay"
    page = viewer_client.get(f"/runs/{run.id}/replay?policies=sliding_window:12").content.decode()
    assert 'title="text probe">employee 4417</th>' in page
    probe = Probe.objects.get(run=run)
    # The same probe again is refused as the API refuses it (writes.add_probe), not silently ignored.
    again = viewer_client.post(url, {"kind": "text", "value": " employee 4417 "})
    assert again.status_code == 409
    assert "this probe is already on the run (text &#x27;employee 4417&#x27;)" in again.content.decode()
    api = viewer_client.post(
        f"/api/v1/runs/{run.id}/probes", '{"kind": "text", "value": "employee 4417"}', "application/json"
    )
    assert api.status_code == 409
    assert api.json()["error"] == "this probe is already on the run (text 'employee 4417')"
    for junk in ("²", "x", "99999999999999999999"):  # no probe's id: nothing removed, and it says so
        refused = viewer_client.post(url, {"delete": junk})
        assert refused.status_code == 404 and "no such probe on this run" in refused.content.decode()
    assert Probe.objects.filter(run=run).count() == 1
    assert viewer_client.post(url, {"delete": str(probe.id)}).status_code == 302
    assert not Probe.objects.filter(run=run).exists()
    bad = viewer_client.post(url, {"kind": "regex", "value": "(["})
    assert bad.status_code == 400 and "not a valid regular expression" in bad.content.decode()


def test_a_viewer_cannot_add_probes_from_the_page(inspect, db):
    reader = factories.user("reader")
    Membership.objects.create(project=inspect.project, user=reader, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(reader)
    page = client.get(f"/runs/{inspect.incident.id}/replay").content.decode()
    assert "Add probe" not in page
    response = client.post(f"/runs/{inspect.incident.id}/replay/probes", {"kind": "text", "value": "x"})
    assert response.status_code == 400 and not Probe.objects.exists()


def test_trace_content_stays_text_on_the_page(viewer_client, inspect):
    run = inspect.hostile
    response = viewer_client.get(f"/runs/{run.id}/replay?policy=full&seq=2")
    assert response.status_code == 200
    body = response.content.decode()
    assert response.context["window"]  # the hostile items are listed...
    assert ui_data.SCRIPT not in body and ui_data.IMG not in body  # ...as text


def test_explain_this_turn_says_where_each_probe_is(viewer_client, inspect):
    run = inspect.incident
    late = viewer_client.get(f"/runs/{run.id}/explain?turn=40")
    probes = {probe["probe"]: probe for probe in late.context["probes"]}
    fact = probes["fact:affected-shard"]
    left = run.calls.filter(turn=23).order_by("seq").first().seq
    assert (fact["how"], fact["left_at_call"], fact["left_reason"]) == ("absent", left, "sliding_window")
    assert 'id="probes-at-turn"' in late.content.decode()
    early = viewer_client.get(f"/runs/{run.id}/explain?turn=20")
    assert {probe["probe"]: probe["how"] for probe in early.context["probes"]}["fact:affected-shard"] == (
        "verbatim"
    )


def test_a_replay_past_the_item_budget_is_a_400_that_says_so(viewer_client, inspect, monkeypatch):
    from ctxview import replay

    monkeypatch.setattr(replay, "MAX_REPLAYED_ITEMS", 600)
    response = viewer_client.get(f"/runs/{inspect.incident.id}/replay")
    assert response.status_code == 400 and "more than 600 window items" in response.content.decode()
    # Full history and pin_end rebuild only what each call added.
    asked = viewer_client.get(f"/runs/{inspect.incident.id}/replay?policies=full,pin_end")
    assert asked.status_code == 200
    assert [row["policy"] for row in asked.context["rows"]] == ["full", "pin_end"]


def test_a_line_equal_to_another_is_drawn_dashed_and_says_so():
    def policy(name: str, windows: list, costs: list) -> dict:
        calls = [
            {"turn": turn, "window": w, "cost_usd": c}
            for turn, (w, c) in enumerate(zip(windows, costs, strict=True), 1)
        ]
        return {"policy": name, "per_call": calls}

    policies = [
        policy("full", [100, 200, 300], [0.1, None, 0.3]),
        policy("pin_end", [100, 200, 300], [0.1, None, 0.3]),
        policy("elide:2", [100, 150, 180], [0.1, 0.1, 0.1]),
    ]
    window = views_replay._figure(policies, "window", "last", "window")["data"]
    assert [trace["name"] for trace in window] == ["full", "pin_end (same as full)", "elide:2"]
    assert [trace["line"]["dash"] for trace in window] == ["solid", "dash", "solid"]
    cost = views_replay._figure(policies, "cost_usd", "sum", "cost")["data"]
    assert cost[0]["y"] == [0.1, None, 0.3]  # no price at turn 2: a gap, not $0
