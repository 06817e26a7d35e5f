"""The runs list: filters, sort, pages, the htmx fragment, empty and error states."""

import pytest

from ctxview.models import Label
from ctxview.shapes import runs as runs_query
from tests import factories
from tests.ctxview import ui_fixtures
from tests.ctxview.ui_data import HOSTILE_RUN

inspect = ui_fixtures.inspect
stranger_client = ui_fixtures.stranger_client
viewer_client = ui_fixtures.viewer_client

URL = "/projects/inspect/runs/"
HTMX = {"HTTP_HX_REQUEST": "true"}


def keys(response) -> list[str]:
    return [run.key for run in response.context["runs"]]


def test_lists_every_run_newest_first_with_its_figures(viewer_client, inspect):
    response = viewer_client.get(URL)
    assert response.status_code == 200
    assert keys(response) == [
        HOSTILE_RUN,  # sent without a start time: now
        "demo-research-brief",
        "demo-order-service-timeout",
        "demo-migration-200-files",
        "demo-incident-turn-40",
    ]
    incident = next(run for run in response.context["runs"] if run.key == "demo-incident-turn-40")
    assert (incident.call_count, incident.turn_count, incident.peak_window) == (57, 40, 7410)
    assert incident.figures["hit_rate"] == pytest.approx(0.6755)
    badges = {badge["type"]: badge["count"] for badge in incident.badges}
    assert badges["fact_dropped"] == 2 and badges["unknown_tool_called"] == 3  # the fact and the rule
    page = response.content.decode()
    for text in ("7,410", "68 %", "341,135", "$0.64", "fact_dropped", "Peak window", "Cache hit"):
        assert text in page, text


@pytest.mark.parametrize(
    "query, expected",
    [
        ("service=oncall-agent", ["demo-incident-turn-40"]),
        ("finding=superseded_included", ["demo-order-service-timeout"]),
        ("finding=fact_dropped&model=claude-sonnet-4-5", ["demo-incident-turn-40"]),
        ("since=2026-11-25&until=2026-11-25", ["demo-migration-200-files"]),
        ("sort=calls&service=debug-agent", ["demo-order-service-timeout"]),
        # "Which runs had the old billing.ts in the window?"
        ("source=src/api/billing.ts&version=v1", ["demo-migration-200-files"]),
        ("source=src/api/billing.ts&version=v9", []),
        ("source=progress.md&service=migration-agent", ["demo-migration-200-files"]),
        ("item=tool%3Anothing-has-this", []),
    ],
)
def test_filters(viewer_client, inspect, query, expected):
    assert keys(viewer_client.get(f"{URL}?{query}")) == expected


def test_sorts_by_any_column_both_ways(viewer_client, inspect):
    by_calls = keys(viewer_client.get(f"{URL}?sort=-calls"))
    assert by_calls == [
        "demo-migration-200-files",
        "demo-incident-turn-40",
        "demo-order-service-timeout",
        "demo-research-brief",
        HOSTILE_RUN,
    ]
    assert keys(viewer_client.get(f"{URL}?sort=calls"))[0] == HOSTILE_RUN
    assert keys(viewer_client.get(f"{URL}?sort=-peak"))[0] == "demo-order-service-timeout"
    assert keys(viewer_client.get(f"{URL}?sort=-hit_rate"))[0] == "demo-incident-turn-40"
    assert keys(viewer_client.get(f"{URL}?sort=-cost"))[0] == "demo-migration-200-files"
    assert keys(viewer_client.get(f"{URL}?sort=-billed"))[0] == "demo-migration-200-files"
    assert keys(viewer_client.get(f"{URL}?sort=-findings"))[0] in (
        "demo-incident-turn-40",
        "demo-migration-200-files",
    )
    assert keys(viewer_client.get(f"{URL}?sort=-turns"))[0] == "demo-incident-turn-40"


def test_pages(viewer_client, inspect, monkeypatch):
    monkeypatch.setattr(runs_query, "PAGE_SIZE", 3)
    first = viewer_client.get(URL)
    assert len(keys(first)) == 3 and b"Next page" in first.content
    second = viewer_client.get(f"{URL}?page=2")
    assert len(keys(second)) == 2 and b"Previous page" in second.content


@pytest.mark.parametrize(
    "query, message",
    [
        ("page=9", "page 9 does not exist: the runs found fill 1 page"),
        ("page=x", "page must be a whole number"),
        ("sort=nope", "sort must be one of"),
        ("since=tuesday", "since must be a date"),
        ("service=ghost", "no run of this project comes from a service called"),
        ("finding=nonsense", "finding must be one of the finding types"),
        ("label=ghost", "no run of this project is labelled 'ghost'"),
        ("source=" + "x" * 501, "source is longer than 500 characters"),
    ],
)
def test_bad_parameters_are_a_400_that_says_why(viewer_client, inspect, query, message):
    response = viewer_client.get(f"{URL}?{query}")
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    fragment = viewer_client.get(f"{URL}?{query}", **HTMX, HTTP_HX_TARGET="runs-table")
    assert (
        fragment.status_code == 400
        and b"<html" not in fragment.content
        and b"state-error" in fragment.content
    )


def test_htmx_gets_only_the_table_or_only_the_page(viewer_client, inspect):
    table = viewer_client.get(f"{URL}?sort=calls", **HTMX, HTTP_HX_TARGET="runs-table")
    assert table.status_code == 200
    body = table.content.decode()
    assert "<html" not in body and "<table" in body and 'class="filters"' not in body
    page = viewer_client.get(URL, **HTMX, HTTP_HX_TARGET="page")
    body = page.content.decode()
    assert (
        "<html" not in body
        and "<title>Runs · Inspect · ctxview</title>" in body
        and 'class="filters"' in body
    )
    assert "HX-Request" in page["Vary"]


def test_another_projects_runs_are_a_404(stranger_client, inspect):
    assert stranger_client.get(URL).status_code == 404


def test_an_empty_project_says_how_to_send_runs(viewer_client, inspect):
    factories.project_with_key("empty", owner=inspect.viewer)
    body = viewer_client.get("/projects/empty/runs/").content.decode()
    assert "No runs yet" in body and "OTEL_EXPORTER_OTLP_ENDPOINT=http://testserver/" in body


def test_an_empty_project_says_how_to_point_each_coding_cli_at_it(viewer_client, inspect):
    factories.project_with_key("empty", owner=inspect.viewer)
    body = viewer_client.get("/projects/empty/runs/").content.decode()
    assert "Point your coding agent at ctxview" in body
    assert "BETA_TRACING_ENDPOINT=http://testserver/" in body  # Claude Code, detailed mode
    assert 'endpoint = "http://testserver/v1/logs"' in body  # Codex config.toml
    assert '"otlpEndpoint": "http://testserver/"' in body  # Gemini CLI settings.json
    assert "What detailed mode sends" in body


def test_filters_that_match_nothing_say_so(viewer_client, inspect):
    body = viewer_client.get(f"{URL}?since=2030-01-01").content.decode()
    assert "No run matches these filters" in body


def test_the_list_escapes_what_traces_sent(viewer_client, inspect):
    body = viewer_client.get(URL).content.decode()
    assert "<script>alert" not in body and "<img src=x" not in body
    assert "hostile-&lt;script&gt;alert(3)&lt;/script&gt;" in body


def test_filter_by_label_and_by_an_item_the_window_held(viewer_client, inspect):
    Label.objects.create(project=inspect.project, run=inspect.incident, name="incident", link="")
    Label.objects.create(project=inspect.project, run=inspect.timeout, name="postmortem", link="")
    response = viewer_client.get(f"{URL}?label=incident")
    assert keys(response) == ["demo-incident-turn-40"]
    page = response.content.decode()
    assert '<option value="incident" selected>incident</option>' in page
    assert '<option value="postmortem">postmortem</option>' in page
    # An item of the run's window by its content hash, as the call page shows it.
    item = inspect.timeout.calls.get(seq=1).items[0]
    found = viewer_client.get(f"{URL}?hash={item['hash']}&label=postmortem")
    assert keys(found) == ["demo-order-service-timeout"]
    assert f'value="{item["hash"]}"' in found.content.decode()


def test_each_row_links_to_its_last_turn_explained_and_its_costliest_cause_of_breaks(viewer_client, inspect):
    response = viewer_client.get(URL)
    rows = {run.key: run for run in response.context["runs"]}
    migration, incident = rows["demo-migration-200-files"], rows["demo-incident-turn-40"]
    assert incident.explain_url == f"/runs/{incident.id}/explain?turn=40"
    # The migration's costliest cause is the time in its system prompt, first at call 31 (its one
    # system_changed break, call 30, is a cause of its own).
    group = migration.costliest_breaks
    assert (group["cause"], group["first"]["seq"]) == ("volatile_system_prompt", 31)
    first = inspect.migration.calls.get(seq=31)
    assert group["first"]["url"] == f"/calls/{first.id}/"
    every = [
        call for call in inspect.migration.calls.all() if (call.analysis or {}).get("cache", {}).get("broke")
    ]
    of_cause = [call for call in every if call.analysis["cache"]["cause"] == "volatile_system_prompt"]
    assert group["count"] == len(of_cause)
    assert group["cost_usd"] == pytest.approx(sum(call.analysis["cache"]["cost_usd"] for call in of_cause))
    assert group["tokens_rewritten"] == sum(call.analysis["cache"]["tokens_rewritten"] for call in of_cause)
    page = response.content.decode()
    assert f'href="/calls/{first.id}/"' in page and "volatile_system_prompt ×" in page
    assert f'href="/runs/{incident.id}/explain?turn=40"' in page and "explain turn 40" in page
    # Not filtered by what a window held: no row says where.
    assert "held at call" not in page


def test_a_run_found_by_what_its_window_held_links_to_the_first_call_that_held_it(viewer_client, inspect):
    response = viewer_client.get(f"{URL}?source=src/api/billing.ts&version=v1")
    (run,) = response.context["runs"]
    seqs = [
        call.seq
        for call in inspect.migration.calls.order_by("seq")
        if any(
            item.get("source") == "src/api/billing.ts" and item.get("version") == "v1" for item in call.items
        )
    ]
    first = inspect.migration.calls.get(seq=seqs[0])
    assert run.held == {
        "call_id": first.id,
        "seq": seqs[0],
        "item_id": "file:src/api/billing.ts@v1",
        "url": f"/calls/{first.id}/",
    }
    assert f'<a class="held-at" href="/calls/{first.id}/"' in response.content.decode()
