"""The run overview, its panels and live updates, Explain this turn, Compare, and Item."""

import html
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxcore.replay import parse
from ctxview import queries
from ctxview.models import Bookmark, Label, Note
from ctxview.panels import presence
from ctxview.replay import replay_run
from ingest.models import Call, Run
from tests import factories
from tests.ctxview import ui_fixtures
from tests.ctxview.ui_data import SCRIPT
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

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


def seq_of_turn(run: Run, turn: int, last: bool = False) -> int:
    seqs = run.calls.filter(turn=turn).values_list("seq", flat=True)
    return max(seqs) if last else min(seqs)


# --- Overview ------------------------------------------------------------------------------------


def test_the_overview_shows_the_kpis_and_loads_each_panel_lazily(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/")
    assert response.status_code == 200
    body = response.content.decode()
    for text in ("7,410", "341,135", "68%", "$0.6420", "Explain turn", "Compare call", "Idle"):
        assert text in body, text
    for slug in ("composition", "cache", "findings", "presence", "calls"):
        assert f'hx-get="/runs/{inspect.incident.id}/panels/{slug}"' in body
    assert 'hx-trigger="every' not in body  # an idle run does not poll


def test_the_overview_as_an_htmx_page_and_for_strangers(viewer_client, stranger_client, inspect):
    page = viewer_client.get(f"/runs/{inspect.incident.id}/", **HTMX, HTTP_HX_TARGET="page")
    label = html.escape(Run.objects.get(pk=inspect.incident.pk).label[:80])  # its title, or its key
    assert b"<html" not in page.content and f"<title>{label} · ctxview</title>" in page.content.decode()
    assert stranger_client.get(f"/runs/{inspect.incident.id}/").status_code == 404


def test_the_composition_panel_has_a_band_per_bucket_and_the_budget(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/panels/composition", **HTMX)
    assert response.status_code == 200 and b"<html" not in response.content
    data = figure(response, "fig-composition")
    names = [trace["name"] for trace in data["data"]]
    assert names[:5] == ["system", "tools", "memory", "conversation", "tool_results"]
    assert names[-2:] == ["limit − reserved output", "reserved output"]
    assert (data["data"][0]["x0"], data["data"][0]["dx"], len(data["data"][0]["y"])) == (1, 1, 40)
    links = data["links"]
    assert (
        links["prefix"] + links["ids"][39] + links["suffix"] == f"/runs/{inspect.incident.id}/explain?turn=40"
    )
    per_call = figure(
        viewer_client.get(f"/runs/{inspect.incident.id}/panels/composition?by=call"), "fig-composition"
    )
    assert len(per_call["data"][0]["y"]) == 57


def test_the_cache_panel_marks_every_break_with_a_link_to_its_call(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/panels/cache")
    data = figure(response, "fig-cache")
    names = [trace["name"] for trace in data["data"]]
    assert names == ["uncached", "cache write", "cache read", "expected read", "hit rate", "cache break"]
    breaks = data["data"][-1]
    broken = factories.calls_with_cache(inspect.incident.calls.all(), broke=True)
    assert breaks["x"] == [call.seq for call in broken]
    assert breaks["customdata"] == [f"/calls/{call.id}/" for call in broken]
    assert b"51 cache breaks" in response.content


def test_the_cache_panel_sums_the_breaks_by_cause_and_pages_every_break(viewer_client, inspect):
    run = inspect.migration
    by_cause = run.accounting["cache_breaks"]["by_cause"]
    total = run.accounting["cache_breaks"]["count"]
    first = viewer_client.get(f"/runs/{run.id}/panels/cache")
    groups = {group["cause"]: group for group in first.context["result"]["by_cause"]}
    assert {cause: group["count"] for cause, group in groups.items()} == {
        cause: entry["count"] for cause, entry in by_cause.items()
    }
    for cause, entry in by_cause.items():
        assert groups[cause]["cost_usd"] == pytest.approx(entry["cost_usd"], abs=1e-5)
    pages = first.context["result"]["breaks_page"]["pages"]
    listed = []
    for page in range(1, pages + 1):
        response = viewer_client.get(f"/runs/{run.id}/panels/cache?breaks_page={page}")
        listed += [entry["seq"] for entry in response.context["result"]["breaks_page"]["rows"]]
    assert len(listed) == len(set(listed)) == total
    cost = run.accounting["cost_usd"]
    said = b"Caching costs more than it saves" in first.content
    assert said == (cost["with_cache"] > cost["without_cache"])


def test_the_run_page_address_carries_the_panels_view(viewer_client, inspect):
    run = inspect.migration
    body = viewer_client.get(f"/runs/{run.id}/?by=call&breaks_page=2").content.decode()
    for slug in ("composition", "cache"):
        assert f'hx-get="/runs/{run.id}/panels/{slug}?by=call&amp;breaks_page=2"' in body
    panel = viewer_client.get(f"/runs/{run.id}/panels/composition?by=turn").content.decode()
    assert f'hx-push-url="/runs/{run.id}/?by=call&amp;scale=window"' in panel


def test_the_findings_panel_explains_each_type(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/panels/findings")
    body = response.content.decode()
    assert (
        "fact_dropped" in body
        and "A fact or standing rule that was in the previous call left the window" in body
    )
    assert "Keep standing facts and rules in a pinned block" in body
    assert "read_log" in body  # the unknown tool, from the evidence
    data = figure(response, "fig-findings")
    assert {trace["name"] for trace in data["data"]} == {"warning", "occurrence"}


def test_the_findings_panel_counts_every_cache_break_as_an_occurrence(viewer_client, inspect):
    run = inspect.migration
    response = viewer_client.get(f"/runs/{run.id}/panels/findings")
    groups = {group["type"]: group for group in response.context["result"]["groups"]}
    breaks = run.accounting["cache_breaks"]["count"]
    invalidated = groups["cache_invalidated"]
    invisible = groups.get("invisible_invalidator", {}).get("occurrences", 0)
    assert invalidated["occurrences"] + invisible == breaks
    assert invalidated["count"] == run.findings.filter(type="cache_invalidated").count()
    assert f"{invalidated['occurrences']} occurrences" in response.content.decode()
    occurrence = next(t for t in figure(response, "fig-findings")["data"] if t["name"] == "occurrence")
    # Each finding is drawn at its own call; the timeline's small diamonds are the other occurrences.
    assert len(occurrence["x"]) == sum(group["occurrences"] - group["count"] for group in groups.values())


def test_the_presence_panel_is_bounded_and_filterable(viewer_client, inspect):
    url = f"/runs/{inspect.incident.id}/panels/presence"
    response = viewer_client.get(url)
    data = figure(response, "fig-presence")
    heatmap = data["data"][0]
    assert heatmap["type"] == "heatmap" and len(heatmap["y"]) == 120 and len(heatmap["x"]) == 57
    assert "fact:affected-shard" in heatmap["y"] and "rule:ticket-owner" in heatmap["y"]
    assert heatmap["y"][:2] == ["system:prompt", "tool:query_metrics"]  # grouped by bucket
    row = heatmap["y"].index("fact:affected-shard")
    cell = data["cells"]["index"][row][heatmap["x"].index(seq_of_turn(inspect.incident, 31))]
    assert data["cells"]["labels"][cell] == "excluded (sliding_window)"
    assert data["links"]["rows"][row] == f"/runs/{inspect.incident.id}/item?id=fact%3Aaffected-shard"
    hidden = response.context["result"]["hidden"]
    assert hidden == response.context["result"]["matching_items"] - 120 > 0
    assert f"Show the {hidden} hidden items" in response.content.decode()
    assert sum(gap["count"] for gap in response.context["result"]["gaps"]) == hidden
    filtered = figure(viewer_client.get(f"{url}?q=fact"), "fig-presence")
    assert filtered["data"][0]["y"] == ["fact:affected-shard"]
    assert b"No item id contains" in viewer_client.get(f"{url}?q=zzz").content


def test_the_presence_map_has_a_row_per_probe_from_the_recorded_replay(viewer_client, inspect):
    from ctxview.models import Probe

    run = inspect.incident
    Probe.objects.create(project=run.project, run=run, kind="text", value="pay-shard-7")
    response = viewer_client.get(f"/runs/{run.id}/panels/presence")
    data = figure(response, "fig-presence")
    probes = data["data"][1]
    assert probes["name"] == "probes" and probes["y"][-1] == "◆ “pay-shard-7”"
    assert "◆ fact:affected-shard" in probes["y"] and "◆ rule:ticket-owner" in probes["y"]
    assert probes["yaxis"] == "y2" and data["layout"]["yaxis2"]["domain"][1] == 1
    codes = presence.PROBE_CODES
    shard = probes["z"][probes["y"].index("◆ fact:affected-shard")]
    left = shard.index(codes["verbatim"]) + shard[shard.index(codes["verbatim"]) :].index(codes["absent"])
    # The column where the fact left is the call the recorded replay says it left at.
    replayed = replay_run(run, [parse("recorded")])["policies"][0]
    [fact] = [probe for probe in replayed["probes"] if probe["probe"] == "fact:affected-shard"]
    assert probes["x"][left] == fact["left_at_call"] and shard[-1] == codes["absent"]
    text = probes["z"][-1]
    assert set(text) <= {codes["verbatim"], codes["absent"]} and codes["verbatim"] in text
    assert 'id="presence-probe-legend"' in response.content.decode()


def test_the_calls_panel_pages(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/panels/calls?page=2")
    body = response.content.decode()
    assert "Calls 51–57 of 57" in body and "break: history_rewritten" in body


def test_each_panel_fills_the_badge_beside_its_title_with_its_summary(viewer_client, inspect):
    run = inspect.incident
    page = viewer_client.get(f"/runs/{run.id}/").content.decode()
    expected = {
        "cache": f"{len(factories.calls_with_cache(run.calls.all(), broke=True))} breaks",
        "findings": f"{run.findings.count()} findings",
        "calls": f"{run.call_count} calls",
    }
    for slug in ("composition", "cache", "findings", "presence", "calls"):
        assert f'id="{slug}-summary"></span>' in page  # empty until the panel loads
        body = viewer_client.get(f"/runs/{run.id}/panels/{slug}").content.decode()
        badge = re.search(rf'id="{slug}-summary" hx-swap-oob="true">([^<]*)</span>', body)
        assert badge is not None and badge.group(1), slug
        if slug in expected:
            assert badge.group(1) == expected[slug], slug


@pytest.mark.parametrize(
    "path, message",
    [
        ("composition?by=week", "by must be one of: turn, call"),
        ("composition?scale=log", "scale must be one of: window, budget"),
        ("presence?rows=0", "rows must be between 1 and 1200"),
        ("presence?rows=lots", "rows must be a whole number"),
        ("calls?page=3", "page 3 does not exist: the calls of this run fill 2 pages"),
        ("cache?breaks_page=99", "breaks_page 99 does not exist: the breaks of this run fill"),
    ],
)
def test_bad_panel_parameters_are_a_400_that_says_why(viewer_client, inspect, path, message):
    response = viewer_client.get(
        f"/runs/{inspect.incident.id}/panels/{path}", **HTMX, HTTP_HX_TARGET="x-body"
    )
    assert response.status_code == 400
    assert message in response.content.decode() and b"<html" not in response.content


def test_panels_of_another_project_or_unknown_are_a_404(viewer_client, stranger_client, inspect):
    assert viewer_client.get(f"/runs/{inspect.incident.id}/panels/nonsense").status_code == 404
    assert stranger_client.get(f"/runs/{inspect.incident.id}/panels/composition").status_code == 404


# --- Review marks (notes, labels, bookmarks) on the overview --------------------------------------


def mark_up(run: Run, author) -> dict:
    """A label with a link, one with a javascript: link, notes on the run, a call and an item, a bookmark."""
    calls = {call.seq: call for call in run.calls.filter(seq__in=(2, 3, 5))}
    Label.objects.create(
        project=run.project, run=run, name="incident", link="https://t.example/INC-7?a=1&b=2"
    )
    Label.objects.create(
        project=run.project, run=run, name="<b>sneaky</b>", link="javascript:alert(document.cookie)"
    )
    notes = {
        "run": Note.objects.create(
            project=run.project, run=run, author=author, body="The <img src=x onerror=alert(4)> run\nsummary"
        ),
        "call": Note.objects.create(
            project=run.project, run=run, call=calls[3], author=author, body="<script>alert(5)</script> slid"
        ),
        "item": Note.objects.create(
            project=run.project, run=run, item_id="fact:affected-shard", author=author, body="the shard fact"
        ),
        "item_on_call": Note.objects.create(
            project=run.project, run=run, call=calls[5], item_id="fact:x", author=author, body="on both"
        ),
    }
    Bookmark.objects.create(project=run.project, call=calls[2], created_by=author)
    return {"calls": calls, "notes": notes}


def test_the_overview_header_shows_the_labels_with_safe_links_and_counts_the_notes(viewer_client, inspect):
    run = inspect.incident
    mark_up(run, inspect.viewer)
    body = viewer_client.get(f"/runs/{run.id}/").content.decode()
    header = body[body.index('id="review-marks"') : body.index('class="kpis"')]
    assert 'incident <a href="https://t.example/INC-7?a=1&amp;b=2" rel="noopener noreferrer"' in header
    assert "&lt;b&gt;sneaky&lt;/b&gt;" in header and "<b>sneaky" not in header
    assert "javascript:alert(document.cookie)" in header  # shown as text ...
    assert 'href="javascript' not in body and "href='javascript" not in body  # ... never as a link
    assert f'<a class="review-count" href="/runs/{run.id}/review">4 notes · 1 bookmark</a>' in header


def test_the_header_is_its_own_htmx_region_and_shows_what_was_just_added(viewer_client, inspect):
    run = inspect.incident
    url = f"/runs/{run.id}/"
    region = viewer_client.get(url, **HTMX, HTTP_HX_TARGET="review-marks").content.decode()
    assert "<html" not in region and "kpis" not in region and "0 notes · 0 bookmarks" in region
    review = f"/runs/{run.id}/review"
    viewer_client.post(f"{review}/add_note", {"body": "seen", "call_seq": "4"})
    viewer_client.post(f"{review}/bookmark", {"call_seq": "4"})
    viewer_client.post(f"{review}/add_label", {"name": "incident", "link": ""})
    region = viewer_client.get(url, **HTMX, HTTP_HX_TARGET="review-marks").content.decode()
    assert "1 note · 1 bookmark" in region and ">incident</span>" in region
    data = figure(viewer_client.get(f"/runs/{run.id}/panels/findings"), "fig-findings")
    assert [trace["x"] for trace in data["data"] if trace["name"] in ("note", "bookmark")] == [[4], [4]]
    viewer_client.post(f"{review}/unbookmark", {"call_seq": "4"})
    viewer_client.post(f"{review}/delete_note", {"note_id": Note.objects.get(run=run).id})
    data = figure(viewer_client.get(f"/runs/{run.id}/panels/findings"), "fig-findings")
    assert {trace["name"] for trace in data["data"]} == {"warning", "occurrence"}
    assert "0 notes · 0 bookmarks" in viewer_client.get(url).content.decode()


def test_the_findings_timeline_draws_notes_and_bookmarks_at_their_calls(viewer_client, inspect):
    run = inspect.incident
    marks = mark_up(run, inspect.viewer)
    response = viewer_client.get(f"/runs/{run.id}/panels/findings")
    body = response.content.decode()
    data = figure(response, "fig-findings")
    traces = {trace["name"]: trace for trace in data["data"]}
    assert set(traces) == {"warning", "occurrence", "note", "bookmark"}
    assert data["layout"]["yaxis"]["categoryarray"][-2:] == ["bookmarks", "notes"]
    notes, bookmarks = traces["note"], traces["bookmark"]
    calls = marks["calls"]
    assert (notes["x"], notes["y"]) == ([3, 5], ["notes", "notes"])
    assert notes["customdata"] == [f"/calls/{calls[3].id}/", f"/calls/{calls[5].id}/"]
    assert notes["hovertext"][0].startswith("call 3: 1 note<br>viewer · ")
    assert notes["hovertext"][0].endswith(": &lt;script&gt;alert(5)&lt;/script&gt; slid")
    assert "item fact:x" in notes["hovertext"][1]
    assert (bookmarks["x"], bookmarks["customdata"]) == ([2], [f"/calls/{calls[2].id}/"])
    assert bookmarks["hovertext"][0].startswith("call 2: bookmarked by viewer · ")
    # Notes on the run, and on an item without a call, are listed under the chart.
    listed = body[body.index('class="run-notes"') : body.index('class="finding-groups"')]
    assert "The &lt;img src=x onerror=alert(4)&gt; run summary" in listed
    assert (
        f'on item <a href="/runs/{run.id}/item?id=fact%3Aaffected-shard"><code>fact:affected-shard</code>'
        in listed
    )
    assert "the shard fact" in listed and "slid" not in listed
    assert "<img src=x" not in body and "<script>alert" not in body


def test_a_run_with_marks_but_no_findings_still_has_its_timeline(viewer_client, inspect):
    run = inspect.incident
    run.findings.all().delete()
    Bookmark.objects.create(project=run.project, call=run.calls.get(seq=7), created_by=inspect.viewer)
    response = viewer_client.get(f"/runs/{run.id}/panels/findings")
    data = figure(response, "fig-findings")
    assert [(trace["name"], trace["x"]) for trace in data["data"]] == [("bookmark", [7])]
    assert b"No findings" in response.content


def test_the_calls_table_flags_noted_and_bookmarked_calls_in_one_query(viewer_client, inspect):
    run = inspect.incident
    url = f"/runs/{run.id}/panels/calls"
    with CaptureQueriesContext(connection) as unmarked:
        viewer_client.get(url)
    mark_up(run, inspect.viewer)
    for call in run.calls.filter(seq__range=(10, 40)):
        Note.objects.create(project=run.project, run=run, call=call, author=inspect.viewer, body="n")
    with CaptureQueriesContext(connection) as marked:
        body = viewer_client.get(url).content.decode()
    assert len(marked.captured_queries) == len(unmarked.captured_queries)  # none per row
    rows = {
        int(seq): cell
        for cell, seq in re.findall(r'<td class="num">([^\n]*?)<a href="/calls/\d+/">(\d+)</a></td>', body)
    }
    assert 'title="bookmarked"' in rows[2] and "✎" not in rows[2]
    assert "✎1</a>" in rows[3] and "bookmarked" not in rows[3]
    assert rows[1] == "" and "✎1" in rows[40] and rows[41] == ""


def test_a_stranger_sees_no_marks_of_another_projects_run(stranger_client, inspect):
    run = inspect.incident
    mark_up(run, inspect.viewer)
    for path in ("", "review", "panels/findings", "panels/calls"):
        response = stranger_client.get(f"/runs/{run.id}/{path}")
        assert response.status_code == 404, path
        assert b"INC-7" not in response.content and b"sneaky" not in response.content


# --- Live ----------------------------------------------------------------------------------------


def test_an_idle_run_stops_the_polling_with_its_last_figures(viewer_client, inspect):
    run = inspect.incident
    response = viewer_client.get(f"/runs/{run.id}/live?calls=50&analysed=50", **HTMX, HTTP_HX_TARGET="kpis")
    assert response.status_code == 286
    assert b"57" in response.content and b"hx-trigger" not in response.content
    assert "run-updated" in json.loads(response["HX-Trigger"])


def test_a_live_run_polls_and_refreshes_when_calls_arrive(viewer_client, inspect):
    run = inspect.timeout
    Run.objects.filter(id=run.id).update(updated_at=timezone.now() - timedelta(seconds=10))
    page = viewer_client.get(f"/runs/{run.id}/").content.decode()
    assert f'hx-get="/runs/{run.id}/live?calls=24&amp;analysed=24" hx-trigger="every 3s"' in page
    assert "Receiving calls" in page
    unchanged = viewer_client.get(f"/runs/{run.id}/live?calls=24&analysed=24", **HTMX)
    assert unchanged.status_code == 204 and unchanged.content == b""
    grew = viewer_client.get(f"/runs/{run.id}/live?calls=20&analysed=20", **HTMX)
    assert grew.status_code == 200 and "run-updated" in json.loads(grew["HX-Trigger"])
    assert b'hx-trigger="every 3s"' in grew.content and b"<html" not in grew.content


def test_an_unchanged_poll_answers_without_reading_the_strips_figures(viewer_client, inspect):
    run = inspect.timeout
    Run.objects.filter(id=run.id).update(updated_at=timezone.now() - timedelta(seconds=10))
    with CaptureQueriesContext(connection) as queries:
        unchanged = viewer_client.get(f"/runs/{run.id}/live?calls=24&analysed=24", **HTMX)
    assert unchanged.status_code == 204
    read = " ".join(query["sql"] for query in queries.captured_queries)
    assert f'"{Call._meta.db_table}"' not in read and "finding" not in read


def test_a_run_still_being_analysed_keeps_polling(viewer_client, inspect):
    run = inspect.migration
    Run.objects.filter(id=run.id).update(analysed_seq=70, updated_at=timezone.now() - timedelta(hours=1))
    page = viewer_client.get(f"/runs/{run.id}/").content.decode()
    assert "Analysing: 70 of 80 calls done" in page and "every 3s" in page
    assert viewer_client.get(f"/runs/{run.id}/live?calls=80&analysed=70", **HTMX).status_code == 204


def test_live_rejects_bad_counts_and_strangers(viewer_client, stranger_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/live?calls=-1", **HTMX, HTTP_HX_TARGET="kpis")
    assert response.status_code == 400 and b"calls must be between 0" in response.content
    assert stranger_client.get(f"/runs/{inspect.incident.id}/live").status_code == 404


# --- Explain this turn ---------------------------------------------------------------------------


def test_explain_turn_40_reports_the_turn_19_fact_dropped_by_the_sliding_window(viewer_client, inspect):
    run = inspect.incident
    response = viewer_client.get(f"/runs/{run.id}/explain?turn=40")
    assert response.status_code == 200
    result = response.context["result"]
    [fact] = [entry for entry in result["gone_important"] if entry["id"] == "fact:affected-shard"]
    assert (fact["reason"], fact["last_turn"], fact["left_turn"]) == ("sliding_window", 22, 23)
    assert fact["left_seq"] == seq_of_turn(run, 23)
    assert "fact:affected-shard (left at turn 23: sliding_window)" in " ".join(result["headlines"])
    body = response.content.decode()
    assert "Gone since the start" in body and "it fell out of the sliding window of recent turns" in body
    assert result["pinned_missing"] == [] and [row["bucket"] for row in result["buckets"]][:2] == [
        "system",
        "tools",
    ]
    assert [row["seq"] for row in result["cache"]] == [seq_of_turn(run, 40, last=True)]


def test_explain_defaults_to_the_last_turn_and_steps_with_the_keyboard(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.timeout.id}/explain")
    assert response.context["turn"] == 10
    body = response.content.decode()
    assert 'data-hotkey="ArrowLeft"' in body and "turn 9" in body and 'data-hotkey="ArrowRight"' not in body
    page = viewer_client.get(f"/runs/{inspect.timeout.id}/explain?turn=6", **HTMX, HTTP_HX_TARGET="page")
    assert b"<html" not in page.content and b"Explain turn 6" in page.content


def test_explain_shows_compaction_and_conflicts(viewer_client, inspect):
    result = viewer_client.get(f"/runs/{inspect.timeout.id}/explain?turn=6").context["result"]
    reasons = {group["reason"] for group in result["gone_groups"]} | {
        e["reason"] for e in result["gone_previous"]
    }
    assert "compacted" in reasons
    assert any(conflict["type"] == "superseded_included" for conflict in result["conflicts"])


@pytest.mark.parametrize(
    "query, message",
    [
        ("turn=0", "turn must be between 1 and 40"),
        ("turn=41", "turn must be between 1 and 40"),
        ("turn=x", "turn must be a whole number"),
    ],
)
def test_explain_rejects_a_bad_turn(viewer_client, inspect, query, message):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/explain?{query}")
    assert response.status_code == 400 and message in response.content.decode()


def test_explain_of_another_projects_run_is_a_404(stranger_client, inspect):
    assert stranger_client.get(f"/runs/{inspect.incident.id}/explain?turn=40").status_code == 404


# --- Compare -------------------------------------------------------------------------------------


def test_compare_two_calls(viewer_client, inspect):
    run = inspect.incident
    a, b = seq_of_turn(run, 22, last=True), seq_of_turn(run, 23)
    response = viewer_client.get(f"/runs/{run.id}/compare?a={a}&b={b}")
    assert response.status_code == 200
    result = response.context["result"]
    removed = {row["id"]: row["reason"] for row in result["removed"]}
    assert removed["fact:affected-shard"] == "sliding_window"
    assert "msg:t23:user" in {row["id"] for row in result["added"]}
    assert result["shared_prefix"] >= 14
    assert {row["bucket"] for row in result["buckets"]} >= {"system", "tools", "conversation"}


def test_compare_shows_changed_content_with_a_diff_on_demand(viewer_client, inspect):
    run = inspect.migration
    response = viewer_client.get(f"/runs/{run.id}/compare?a=30&b=31")
    changed = {row["id"]: row for row in response.context["result"]["changed"]}
    assert changed["system:prompt"]["content_changed"]
    diff = viewer_client.get(
        f"/runs/{run.id}/compare/item?a=30&b=31&item=system:prompt", **HTMX, HTTP_HX_TARGET="diff-1"
    )
    assert diff.status_code == 200 and b"<html" not in diff.content
    assert b"<del>" in diff.content and b"<ins>" in diff.content


def test_compare_defaults_and_its_htmx_region(viewer_client, inspect):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/compare")
    assert (response.context["a"]["seq"], response.context["b"]["seq"]) == (56, 57)
    region = viewer_client.get(
        f"/runs/{inspect.incident.id}/compare?a=1&b=2", **HTMX, HTTP_HX_TARGET="comparison"
    )
    assert (
        b"<html" not in region.content
        and b"<form" not in region.content
        and b"Bucket deltas" in region.content
    )


@pytest.mark.parametrize(
    "path, message",
    [
        ("compare?a=0&b=2", "a must be between 1 and 57"),
        ("compare?a=1&b=99", "b must be between 1 and 57"),
        ("compare/item?a=1&b=2&item=nope", "item must be the id of an item in both calls"),
    ],
)
def test_compare_rejects_bad_parameters(viewer_client, inspect, path, message):
    response = viewer_client.get(f"/runs/{inspect.incident.id}/{path}")
    assert response.status_code == 400 and message in response.content.decode()


def test_compare_in_another_project_is_a_404(stranger_client, inspect):
    assert stranger_client.get(f"/runs/{inspect.incident.id}/compare?a=1&b=2").status_code == 404


# --- Item ----------------------------------------------------------------------------------------


def test_the_item_page_tells_the_facts_life(viewer_client, inspect):
    run = inspect.incident
    response = viewer_client.get(f"/runs/{run.id}/item?id=fact:affected-shard")
    assert response.status_code == 200
    result = response.context["result"]
    assert (result["first_turn"], result["last_turn"]) == (19, 22)
    assert result["left"][0]["reason"] == "sliding_window" and result["left"][0]["turn"] == 23
    assert [trace["name"] for trace in figure(response, "fig-item")["data"]] == ["verbatim", "excluded"]
    assert b"Confirmed: the affected shard is pay-shard-7" in response.content
    shown = [{k: v for k, v in f.items() if k != "help"} for f in response.context["findings"]]
    assert shown and shown == [f for f in queries.findings(run) if f["item_id"] == "fact:affected-shard"]


def test_explain_lists_the_findings_of_the_turns_calls_only(viewer_client, inspect):
    run = inspect.incident
    turn = run.calls.get(seq=next(f["call_seq"] for f in queries.findings(run) if f["call_seq"])).turn
    response = viewer_client.get(f"/runs/{run.id}/explain?turn={turn}")
    seqs = [row["seq"] for row in response.context["result"]["cache"]]
    expected = [f for f in queries.findings(run) if f["call_seq"] in seqs]
    shown = [{k: v for k, v in f.items() if k != "help"} for f in response.context["result"]["findings"]]
    assert expected and sorted(map(repr, shown)) == sorted(map(repr, expected))


def test_the_item_page_rejects_a_missing_id_and_unknown_items(viewer_client, stranger_client, inspect):
    url = f"/runs/{inspect.incident.id}/item"
    assert viewer_client.get(url).status_code == 400
    assert b"id (the item&#x27;s id) is required" in viewer_client.get(url).content
    assert viewer_client.get(f"{url}?id=nope").status_code == 404
    assert stranger_client.get(f"{url}?id=fact:affected-shard").status_code == 404
    page = viewer_client.get(f"{url}?id=rule:ticket-owner", **HTMX, HTTP_HX_TARGET="page")
    assert page.status_code == 200 and b"<html" not in page.content


# --- Trace data is text, everywhere --------------------------------------------------------------


def test_every_run_page_escapes_what_the_trace_sent(viewer_client, inspect):
    run = inspect.hostile
    paths = [
        f"/runs/{run.id}/",
        *[
            f"/runs/{run.id}/panels/{slug}"
            for slug in ("composition", "cache", "findings", "presence", "calls")
        ],
        f"/runs/{run.id}/explain?turn=2",
        f"/runs/{run.id}/compare?a=1&b=2",
        f"/runs/{run.id}/item?id=<script>alert(1)</script>",
        f"/runs/{run.id}/item?id=fact:<img src=x onerror=alert(2)>",
    ]
    for path in paths:
        response = viewer_client.get(path)
        assert response.status_code == 200, path
        body = response.content.decode()
        assert "<script>alert" not in body and "<img src=x" not in body, path
    body = viewer_client.get(f"/runs/{run.id}/compare?a=1&b=2").content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


def test_panels_are_compressed_but_pages_with_the_csrf_token_are_not(viewer_client, inspect):
    import gzip

    panel = viewer_client.get(f"/runs/{inspect.incident.id}/panels/presence", HTTP_ACCEPT_ENCODING="gzip")
    assert panel["Content-Encoding"] == "gzip"
    assert b"fig-presence" in gzip.decompress(panel.content)
    page = viewer_client.get(f"/runs/{inspect.incident.id}/", HTTP_ACCEPT_ENCODING="gzip")
    assert not page.has_header("Content-Encoding") and b"X-CSRFToken" in page.content


def test_numbers_in_forms_and_urls_are_plain_while_the_text_has_separators(viewer_client, inspect):
    run = inspect.migration
    Run.objects.filter(id=run.id).update(
        call_count=1234, turn_count=1500, analysed_seq=1000, updated_at=timezone.now()
    )
    body = viewer_client.get(f"/runs/{run.id}/").content.decode()
    assert "?calls=1234&amp;analysed=1000" in body
    assert 'max="1500" value="1500"' in body and 'max="1234" value="1234"' in body
    assert "1,234" in body  # the KPI strip
    assert 'max="1500"' in viewer_client.get(f"/runs/{run.id}/explain?turn=2").content.decode()


# --- Per agent -----------------------------------------------------------------------------------


def test_run_level_findings_name_their_agent_escaped(client, alice, send):  # noqa: F811
    history = [factories.user_message("Summarise the incident.")]
    for number in range(1, 26):  # the whole history re-sent on every call: quadratic for this agent
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=bytes(range(1, 17)),
            number=number,
            messages=history,
            attributes={
                "gen_ai.conversation.id": "conv-agent",
                "gen_ai.agent.name": SCRIPT,  # an agent name is the trace's text, like any other
                "gen_ai.usage.input_tokens": 2000 + 100 * number,
                "gen_ai.usage.output_tokens": 20,
            },
        )
        send(request)
        history = [*history, factories.assistant_message(f"part {number}"), factories.user_message("go on")]
    run = Run.objects.get(key="conv-agent")
    [finding] = run.findings.filter(type="quadratic_history")
    assert finding.evidence["agent"] == SCRIPT

    client.force_login(alice)
    body = client.get(f"/runs/{run.id}/panels/findings").content.decode()
    assert SCRIPT not in body
    assert "agent <code>&lt;script&gt;alert(1)&lt;/script&gt;</code>: billed" in body


def test_the_overview_renders_its_panels_in_the_page_when_asked_for_a_browser_without_javascript(
    viewer_client, inspect
):
    run = inspect.migration
    plain = viewer_client.get(f"/runs/{run.id}/").content.decode()
    assert f'href="/runs/{run.id}/?panels=server"' in plain and "Loading prompt cache per call…" in plain
    page = viewer_client.get(f"/runs/{run.id}/?panels=server").content.decode()
    assert "Loading" not in page and "the panels below were rendered by the server" in page
    # The tables a reader needs without a chart: the breaks by cause, the findings, the calls.
    assert "volatile_system_prompt" in page and "conflicting_versions" in page
    assert page.count('class="panel-body"') == page.count('id="panel-') > 0
    # Trace content stays escaped: the same templates as the panels' own answers.
    hostile = viewer_client.get(f"/runs/{inspect.hostile.id}/?panels=server").content.decode()
    assert "<script>alert(" not in hostile and "<img src=x" not in hostile
    assert "&lt;script&gt;alert(" in hostile[hostile.index('id="panel-') :]
