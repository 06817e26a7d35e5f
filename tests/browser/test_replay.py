"""The Replay page in a real browser, on the demo incident run: the policies table as a reader sees it,
the cheapest policy that keeps every probe, a text probe added through the page, a policy's window."""

import re
from io import StringIO

from django.core.management import call_command
from playwright.sync_api import expect

from ingest.models import Run
from tests.browser.conftest import login, screenshot, settle


def _table(page) -> dict[str, dict[str, str]]:
    """The policies table as text: policy -> column header -> cell."""
    # Text content, not inner text: the headers are upper-cased by CSS.
    headers = [text.strip() for text in page.locator("table.replay-table thead th").all_text_contents()]
    table = {}
    for row in page.locator("table.replay-table tbody tr").all():
        cells = [" ".join(text.split()) for text in row.locator("td").all_text_contents()]
        table[row.get_attribute("data-policy")] = dict(zip(headers, cells, strict=True))
    return table


def _tokens(text: str) -> int:
    return int(text.replace(",", ""))


def test_replay_of_the_incident_run_reads_like_the_article(live_server, browser_page, alice, project, key):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    incident = Run.objects.get(project=project, key="demo-incident-turn-40")
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")

    # From the run page to its replay.
    page.goto(f"{base}/runs/{incident.id}/")
    settle(page)
    page.click("text=Replay under other policies")
    page.wait_for_url(f"{base}/runs/{incident.id}/replay")
    settle(page)

    # Follow the shard and the employee number as texts, added through the page.
    for text in ("pay-shard-7", "employee 4417"):
        page.fill("form.add-probe input[name=value]", text)
        page.click("form.add-probe button[type=submit]")
        page.wait_for_url(f"{base}/runs/{incident.id}/replay")
        settle(page)
    page.fill("input[name=policies]", "recorded,full,sliding_window:12,user_verbatim:4")
    page.click("form.replay-form button[type=submit]")
    page.wait_for_url(lambda url: "policies=" in url)
    settle(page)

    table = _table(page)
    assert list(table) == ["recorded", "full", "sliding_window:12", "user_verbatim:4"]
    full, sliding, verbatim = table["full"], table["sliding_window:12"], table["user_verbatim:4"]
    for probe in ("fact:affected-shard", "rule:ticket-owner", "pay-shard-7", "employee 4417"):
        assert full[probe] == "verbatim" and verbatim[probe] == "verbatim", probe
    assert sliding["pay-shard-7"].startswith("absent (left at call")
    assert sliding["fact:affected-shard"].startswith("absent")
    assert sliding["employee 4417"] == "verbatim"  # only because the agent repeated it
    billed = {name: _tokens(row["Billed input"]) for name, row in table.items()}
    assert 0.35 < billed["user_verbatim:4"] / billed["full"] < 0.65
    assert billed["sliding_window:12"] < billed["full"] / 2
    best = page.locator("tr.best-row")
    assert best.get_attribute("data-policy") == "user_verbatim:4"
    assert "cheapest keeping every probe" in best.inner_text()
    assert page.evaluate("document.getElementById('plot-replay-window').data.length") == 4
    screenshot(page, "replay")

    # A policy's window at the query call, swapped in by htmx.
    page.evaluate("window.stillTheSamePage = true")
    page.click("tr[data-policy='sliding_window:12'] td a")
    page.locator("#window h2", has_text="Window of sliding_window:12 at call 57").wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    ids = [text.strip() for text in page.locator("#window tbody td.item-id").all_text_contents()]
    assert "fact:affected-shard" not in ids and "msg:t37:answer" in ids

    # The same policy's window in the call view, labelled as a replay.
    page.click("tr[data-policy='user_verbatim:4'] a.call-view")
    page.wait_for_url(re.compile(r"/calls/\d+/\?policy=user_verbatim%3A4$"))
    section = page.locator("#policy-window")
    expect(section.locator("h2")).to_contain_text("Replayed under user_verbatim:4")
    assert "replay, not what was sent" in section.locator("h2").inner_text()
    rows = section.locator("table.replay-probes tbody tr")
    here = {
        row.locator("td").nth(0).inner_text(): row.locator("td").nth(1).inner_text() for row in rows.all()
    }
    assert here["fact:affected-shard"] == "verbatim" and here["pay-shard-7"] == "verbatim"
    assert "fact:affected-shard" in section.locator("table.replay-window").inner_text()
    assert page.locator("h1").inner_text().startswith("Call 57")  # the recorded call's page around it
    screenshot(section, "call-replay")
    assert page.console.errors == []
