"""The inspector in a real browser, on the demo runs: from the runs list to the turn-40 run, its charts,
a cache break's diff, Explain this turn, Compare, Item; live updates; trace content stays text."""

import re
from datetime import UTC, datetime, timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

import ctxview_sdk
from ctxview.models import Bookmark, Label, Note
from ingest.models import Call, Run
from tests.browser.conftest import login, screenshot, settle
from tests.ctxview.ui_data import HOSTILE_RUN, hostile_story

# The pixel position of a figure's point, from plotly's own axes (so a click lands on the marker).
POINT = """([id, name, x, fraction]) => {
  const gd = document.getElementById(id);
  const trace = gd._fullData.find(t => t.name === name);
  const i = trace.x ? trace.x.indexOf(x) : Math.round((x - trace.x0) / trace.dx);
  const layout = gd._fullLayout;
  const ya = trace.yaxis === 'y2' ? layout.yaxis2 : layout.yaxis;
  const box = gd.getBoundingClientRect();
  return [
    box.left + layout._size.l + layout.xaxis.l2p(x),
    box.top + layout._size.t + ya.l2p(trace.y[i] * fraction),
  ];
}"""
TRACES = "id => document.getElementById(id).data.map(trace => trace.name)"
# The same for a marker on a category row (the findings timeline's types, notes and bookmarks).
MARK = """([id, name, x]) => {
  const gd = document.getElementById(id);
  const trace = gd._fullData.find(t => t.name === name);
  const layout = gd._fullLayout;
  const box = gd.getBoundingClientRect();
  return [
    box.left + layout._size.l + layout.xaxis.d2p(x),
    box.top + layout._size.t + layout.yaxis.d2p(trace.y[trace.x.indexOf(x)]),
  ];
}"""


def three_call_run(live_server, key: str, run_key: str) -> Run:
    """Three calls of one turn each, a system prompt and a message, sent through the SDK."""
    ctxview_sdk.configure(live_server.url, key=key, service_name=f"{run_key}-agent", send_content=True)
    try:
        for turn in (1, 2, 3):
            with ctxview_sdk.call(run_key, turn, "claude-sonnet-4-5") as c:
                c.add_item(
                    "system:prompt", "system", "system", content="You help.", role="system", tokens=900
                )
                c.add_item(f"msg:{turn}", "message", "conversation", content="hi", role="user", tokens=50)
                c.set_usage({"input_tokens": 950, "output_tokens": 20})
        assert ctxview_sdk.flush(timeout=30)
    finally:
        ctxview_sdk.shutdown(timeout=10)
    return Run.objects.get(key=run_key)


def first_seq_of_turn(run: Run, turn: int) -> int:
    return min(run.calls.filter(turn=turn).values_list("seq", flat=True))


def test_from_the_runs_list_to_the_turn_40_fact(live_server, browser_page, alice, project, key):
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    Run.objects.filter(project=project).update(updated_at=timezone.now() - timedelta(hours=1))
    incident = Run.objects.get(project=project, key="demo-incident-turn-40")
    # What a reviewer left on the run: a label, a note on the run, a note and a bookmark on the call where
    # the fact left the window.
    drop = Call.objects.get(run=incident, seq=first_seq_of_turn(incident, 23))
    Label.objects.create(
        project=project, run=incident, name="incident", link="https://tickets.example/INC-4711"
    )
    Note.objects.create(
        project=project, run=incident, author=alice, body="Wrong shard restarted: the agent lost its fact."
    )
    Note.objects.create(
        project=project, run=incident, call=drop, author=alice, body="fact:affected-shard leaves here."
    )
    Bookmark.objects.create(project=project, call=drop, created_by=alice)
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")

    # Runs list: every run with its figures.
    page.goto(f"{base}/projects/alpha/runs/")
    # The three stories and a run per coding-CLI recording (ctxview/demo/cli.py).
    assert page.locator("table.runs tbody tr").count() == Run.objects.filter(project=project).count() >= 3
    screenshot(page, "runs")

    # "Which runs had the old billing.ts in the window?", from the list's filters.
    page.fill("input[name=source]", "src/api/billing.ts")
    page.fill("input[name=version]", "v1")
    page.click("form.filters button[type=submit]")
    page.wait_for_url(re.compile(r"source=src%2Fapi%2Fbilling\.ts&version=v1"))
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    assert "demo-migration-200-files" in page.locator("table.runs tbody").inner_text()
    page.goto(f"{base}/projects/alpha/runs/")

    # To the turn-40 run, through htmx (the page is not reloaded).
    page.evaluate("window.stillTheSamePage = true")
    page.click("text=demo-incident-turn-40")
    page.wait_for_url(f"{base}/runs/{incident.id}/")
    settle(page)
    assert page.evaluate("window.stillTheSamePage") is True
    assert page.title() == f"{Run.objects.get(pk=incident.pk).label[:80]} · ctxview"  # its title, or key
    composition = page.evaluate(TRACES, "plot-composition")
    assert composition == [
        "system",
        "tools",
        "memory",
        "conversation",
        "tool_results",
        "scaffolding",
        "limit − reserved output",
        "reserved output",
    ]
    assert page.evaluate("document.getElementById('plot-composition').data[0].y.length") == 40
    cache = page.evaluate(TRACES, "plot-cache")
    assert cache == ["uncached", "cache write", "cache read", "expected read", "hit rate", "cache break"]
    breaks = page.evaluate("document.getElementById('plot-cache').data[5].x")
    assert len(breaks) == 51
    presence = page.evaluate("document.getElementById('plot-presence').data[0]")
    assert presence["type"] == "heatmap" and "fact:affected-shard" in presence["y"]
    # The probes are rows of their own, drawn above the items in their own colours.
    probes = page.evaluate("document.getElementById('plot-presence').data[1]")
    assert probes["name"] == "probes" and "◆ fact:affected-shard" in probes["y"]
    ticks = "(name) => [...document.querySelectorAll(`#plot-presence .${name} text`)].map(t => t.textContent)"
    assert sorted(page.evaluate(ticks, "y2tick")) == sorted(probes["y"])
    assert not any(label.startswith("◆") for label in page.evaluate(ticks, "ytick"))
    top = "(name) => document.querySelector(`#plot-presence .${name}`).getBoundingClientRect().top"
    assert page.evaluate(top, "y2tick") < page.evaluate(top, "ytick")
    assert page.locator("#presence-probe-legend").is_visible()
    findings = page.evaluate(TRACES, "plot-findings")
    assert findings[-2:] == ["bookmark", "note"]
    assert page.evaluate("document.getElementById('plot-findings').data.at(-1).x") == [drop.seq]
    assert "incident" in page.locator(".review-marks .chip").inner_text()
    assert page.locator(".review-count").inner_text() == "2 notes · 1 bookmark"
    assert "Wrong shard restarted" in page.locator("#findings-body .run-notes").inner_text()
    screenshot(page, "run-overview")
    screenshot(page.locator("#panel-composition"), "composition")
    screenshot(page.locator("#panel-cache"), "cache")
    screenshot(page.locator("#panel-presence"), "presence")

    # Click the invalidation marker where the turn-19 fact left: the call, its invalidator and the diff.
    seq = first_seq_of_turn(incident, 23)
    assert seq in breaks
    page.locator("#plot-cache").scroll_into_view_if_needed()
    page.mouse.click(*page.evaluate(POINT, ["plot-cache", "cache break", seq, 1]))
    call = Call.objects.get(run=incident, seq=seq)
    page.wait_for_url(f"{base}/calls/{call.id}/")
    settle(page)
    assert page.evaluate("window.stillTheSamePage") is True
    assert page.locator(".break-box h3").inner_text() == "Cache broken: history_rewritten"
    # A sliding window removed items: said in words, with the removed items listed, not a byte diff of
    # two unrelated messages.
    story = page.locator(".break-box .rewrite-story")
    assert "were removed (sliding_window)" in story.inner_text()
    assert "everything from position" in story.inner_text()
    assert page.locator(".break-box pre.diff").count() == 0
    assert page.locator("tr.invalidator").count() == 1 and page.locator("tr.boundary-row").count() == 1
    screenshot(page, "call")

    # Previous and next call with the keyboard.
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"{base}/calls/{Call.objects.get(run=incident, seq=seq + 1).id}/")
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"{base}/calls/{call.id}/")

    # Back to the run; click turn 40 on the composition chart: Explain this turn.
    page.click(f".crumbs a[href='/runs/{incident.id}/']")
    page.wait_for_url(f"{base}/runs/{incident.id}/")
    settle(page)
    page.locator("#plot-composition").scroll_into_view_if_needed()
    page.mouse.click(*page.evaluate(POINT, ["plot-composition", "system", 40, 0.5]))
    page.wait_for_url(f"{base}/runs/{incident.id}/explain?turn=40")
    settle(page)
    fact = page.locator("#gone-since-start tbody tr", has_text="fact:affected-shard")
    assert "sliding_window" in fact.inner_text()
    assert f"call {seq} (turn 23)" in fact.inner_text()
    assert "fact:affected-shard (left at turn 23: sliding_window)" in page.locator(".headlines").inner_text()
    screenshot(page, "explain-turn-40")

    # Compare the two calls around the drop.
    page.click("text=Compare the two calls item by item")
    page.wait_for_url(re.compile(r"/compare\?a=56&b=57$"))
    page.fill("input[name=a]", str(seq - 1))
    page.fill("input[name=b]", str(seq))
    page.click("#page form.filters button[type=submit]")
    page.wait_for_url(re.compile(rf"/compare\?a={seq - 1}&b={seq}$"))
    removed = page.locator("section.card", has_text="Removed").locator("tr", has_text="fact:affected-shard")
    removed.wait_for()
    assert "sliding_window" in removed.inner_text()
    screenshot(page, "compare")

    # The fact's whole life.
    removed.locator("a").click()
    page.wait_for_url(re.compile(r"/item\?id=fact%3Aaffected-shard$"))
    settle(page)
    assert page.evaluate(TRACES, "plot-item") == ["verbatim", "excluded"]
    assert "sliding_window" in page.locator("section.card", has_text="When it left the window").inner_text()
    screenshot(page, "item")

    assert page.console.errors == []
    assert page.console.dialogs == []


def test_a_run_that_is_still_receiving_calls_updates_itself(live_server, browser_page, alice, project, key):
    ctxview_sdk.configure(live_server.url, key=key, service_name="live-agent", send_content=True)
    start = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

    def send(turns):
        for turn in turns:
            with ctxview_sdk.call(
                "live-run", turn, "claude-sonnet-4-5", start_time=start + timedelta(minutes=turn)
            ) as c:
                c.add_item(
                    "system:prompt", "system", "system", content="You help.", role="system", tokens=900
                )
                for n in range(1, turn + 1):
                    c.add_item(
                        f"msg:{n}", "message", "conversation", content=f"message {n}", role="user", tokens=50
                    )
                c.set_budget(limit=10_000, reserved_output=1_000)
                c.set_usage({"input_tokens": 950 + 50 * turn, "output_tokens": 20})
        assert ctxview_sdk.flush(timeout=30)

    try:
        send(range(1, 4))
        run = Run.objects.get(project=project, key="live-run")
        page, base = browser_page, live_server.url
        login(page, base, "alice", "pw-alice")
        page.goto(f"{base}/runs/{run.id}/")
        settle(page)
        assert "Receiving calls" in page.locator(".run-status").inner_text()
        assert page.locator(".kpis strong").first.inner_text() == "3"
        send(range(4, 6))
        page.wait_for_function(
            "() => document.querySelector('.kpis strong').textContent === '5'", timeout=20_000
        )
        page.wait_for_function(
            "() => { const gd = document.getElementById('plot-composition');"
            " return gd && gd.data && gd.data[0].y.length === 5; }",
            timeout=20_000,
        )
        screenshot(page, "live", docs=False)
        assert page.console.errors == []
    finally:
        ctxview_sdk.shutdown(timeout=10)


def test_notes_and_bookmarks_on_the_overview(live_server, browser_page, alice, project, key):
    """A run with a note and a bookmark and no findings: the timeline draws the marks, a mark opens its
    call, and a note added on the review page shows on the overview when the reviewer comes back."""
    run = three_call_run(live_server, key, "marked-run")
    Run.objects.filter(project=project).update(updated_at=timezone.now() - timedelta(hours=1))
    run.refresh_from_db()
    run.findings.all().delete()  # whatever the analyses found: this run is about the marks alone
    calls = {call.seq: call for call in run.calls.all()}
    Note.objects.create(
        project=project, run=run, call=calls[2], author=alice, body="<img src=x onerror=alert(7)> look here"
    )
    Bookmark.objects.create(project=project, call=calls[3], created_by=alice)
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")
    page.goto(f"{base}/runs/{run.id}/")
    settle(page)
    assert page.evaluate(TRACES, "plot-findings") == ["bookmark", "note"]
    assert page.evaluate("document.getElementById('plot-findings').layout.yaxis.categoryarray") == [
        "bookmarks",
        "notes",
    ]
    assert "No findings" in page.locator("#findings-body").inner_text()
    assert page.locator("#calls-body .mark-bookmark").count() == 1
    assert page.locator("#calls-body .mark-note").inner_text() == "✎1"

    # The note's hover quotes it as text; a click opens its call.
    page.locator("#plot-findings").scroll_into_view_if_needed()
    page.mouse.move(*page.evaluate(MARK, ["plot-findings", "note", 2]))
    hover = page.locator("#plot-findings .hoverlayer")
    hover.get_by_text("look here", exact=False).wait_for()
    assert "<img src=x onerror=alert(7)> look here" in hover.text_content()
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    screenshot(page.locator("#panel-findings"), "findings-marks", docs=False)
    page.mouse.click(*page.evaluate(MARK, ["plot-findings", "note", 2]))
    page.wait_for_url(f"{base}/calls/{calls[2].id}/")
    settle(page)

    # Back on the overview, to the review page: a second note, on call 3.
    page.click(f".crumbs a[href='/runs/{run.id}/']")
    page.wait_for_url(f"{base}/runs/{run.id}/")
    settle(page)
    page.click(".review-count")
    page.wait_for_url(f"{base}/runs/{run.id}/review")
    add = page.locator("form.add-note")
    add.locator("textarea[name=body]").fill("and here")
    add.locator("input[name=call_seq]").fill("3")
    add.get_by_role("button", name="Add note").click()
    page.locator("article.note", has_text="and here").wait_for()
    # The browser's Back button (twice: the form's answer is an entry of its own): htmx restores the
    # overview from its history cache, and the header and the timeline are read again.
    page.go_back()
    page.wait_for_url(f"{base}/runs/{run.id}/review")
    page.go_back()
    page.wait_for_url(f"{base}/runs/{run.id}/")
    page.wait_for_function("() => document.querySelector('.review-count').textContent.startsWith('2 notes')")
    settle(page)
    assert page.evaluate("document.getElementById('plot-findings').data.at(-1).x") == [2, 3]
    assert page.console.errors == []
    assert page.console.dialogs == []


def test_trace_content_is_text_in_the_browser(live_server, browser_page, alice, project, key):
    ctxview_sdk.configure(
        live_server.url, key=key, service_name="svc-<img src=x onerror=alert(9)>", send_content=True
    )
    try:
        hostile_story()
        assert ctxview_sdk.flush(timeout=30)
    finally:
        ctxview_sdk.shutdown(timeout=10)
    run = Run.objects.get(project=project, key=HOSTILE_RUN)
    calls = list(run.calls.order_by("seq"))
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")
    for path in (
        "/projects/alpha/runs/",
        f"/runs/{run.id}/",
        f"/calls/{calls[0].id}/",
        f"/calls/{calls[1].id}/",
        f"/runs/{run.id}/explain?turn=2",
        f"/runs/{run.id}/compare?a=1&b=2",
        f"/runs/{run.id}/item?id=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    ):
        page.goto(base + path)
        settle(page)
        for plot in page.locator("[data-figure]").all():  # plotly draws trace text in labels and hovers
            box = plot.bounding_box()
            if box:
                page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        assert (
            page.evaluate("document.querySelectorAll('img[src=\"x\"], script:not([src]):not([type])').length")
            == 0
        )
    # Open every item's content on the second call.
    page.goto(f"{base}/calls/{calls[1].id}/")
    settle(page)
    for link in page.locator("td.preview a").all():
        link.click()
        page.locator("#item-content pre.content").wait_for()
    assert "<script>alert(1)</script>" in page.locator("#items").inner_text()
    assert "<img src=x onerror=alert(2)>" in page.locator("#item-content").inner_text()
    screenshot(page, "hostile-call", docs=False)
    assert page.console.dialogs == []
    assert page.console.errors == []


def test_a_long_run_is_binned_and_every_screen_works(live_server, browser_page, alice, project, key):
    """300 calls (bench/ui.py measures 1,000): the presence map bins its columns, every screen draws."""
    from ctxview.management.commands import longrun

    ctxview_sdk.configure(
        live_server.url, key=key, service_name=longrun.SERVICE, send_content=True, timeout=60
    )
    try:
        longrun.record(300, "long-300")
        assert ctxview_sdk.flush(timeout=300)
    finally:
        ctxview_sdk.shutdown(timeout=30)
    run = Run.objects.get(project=project, key="long-300")
    assert (run.call_count, run.analysed_seq) == (300, 300)
    last = Call.objects.get(run=run, seq=300)
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")
    page.goto(f"{base}/runs/{run.id}/")
    settle(page)
    presence = page.evaluate("document.getElementById('plot-presence').data[0]")
    assert len(presence["x"]) == 150 and len(presence["y"]) == 120  # 2 calls a column, 120 rows
    assert "fact:t20" in presence["y"] and "tool:read_file" in presence["y"]
    screenshot(page, "long-run-overview")
    for path in (
        f"/runs/{run.id}/explain?turn=75",
        f"/runs/{run.id}/compare?a=1&b=300",
        f"/runs/{run.id}/item?id=fact%3At20",
        f"/calls/{last.id}/",
    ):
        page.goto(base + path)
        settle(page)
        assert page.locator(".state-error").count() == 0, path
    assert page.console.errors == []


def test_the_three_jobs_from_the_runs_list_take_the_clicks_claimed(
    live_server, browser_page, alice, project, key
):
    """Each job starts on the runs list, logged in; every click is named (typing into a field is none).
    Last round: 2, 2 and 4 clicks (run + chart point; run + break; filter + run + review page + add note)."""
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    Run.objects.filter(project=project).update(updated_at=timezone.now() - timedelta(hours=1))
    incident = Run.objects.get(project=project, key="demo-incident-turn-40")
    migration = Run.objects.get(project=project, key="demo-migration-200-files")
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")
    runs = f"{base}/projects/alpha/runs/"

    def row(run_key: str):
        return page.locator("table.runs tbody tr", has_text=run_key)

    def click(locator, name: str, clicks: list[str]) -> None:
        locator.click()
        clicks.append(name)

    # 1. Why did turn 40 of the incident go wrong? The fact it needed left the window at turn 23.
    page.goto(runs)
    job = []
    click(row("demo-incident-turn-40").locator("a.explain-last"), "explain turn 40", job)
    page.wait_for_url(f"{base}/runs/{incident.id}/explain?turn=40")
    settle(page)
    assert "fact:affected-shard (left at turn 23: sliding_window)" in page.locator(".headlines").inner_text()
    assert job == ["explain turn 40"]

    # 2. What in the migration's prefix broke the cache, and what did it cost over the run?
    page.goto(runs)
    job = []
    costliest = row("demo-migration-200-files").locator("a.costliest-break")
    cost = re.fullmatch(r"volatile_system_prompt ×(\d+) (\$[\d.]+)", costliest.inner_text().strip())
    assert cost, costliest.inner_text()
    click(costliest, "volatile_system_prompt ×N $X", job)
    page.wait_for_url(f"{base}/calls/{Call.objects.get(run=migration, seq=31).id}/")
    settle(page)
    assert page.locator(".break-box h3").inner_text() == "Cache broken: volatile_system_prompt"
    # The prefix item that changed, byte by byte (the time in the system prompt), and the cause's total.
    assert "system:prompt" in page.locator(".break-box .diff-head").inner_text()
    assert page.locator(".break-box pre.diff del").count() and page.locator(".break-box pre.diff ins").count()
    total = page.locator(".break-box .cause-total").inner_text()
    assert f"broke the cache {cost[1]} times" in total and f"{cost[2]} in all" in total
    assert job == ["volatile_system_prompt ×N $X"]
    screenshot(page.locator(".break-box"), "break-cause-total")

    # 3. Which runs held the old billing.ts, and a note on the call that held it.
    page.goto(runs)
    job = []
    page.fill("input[name=source]", "src/api/billing.ts")
    page.fill("input[name=version]", "v1")
    click(page.locator("form.filters button[type=submit]"), "Filter", job)
    page.wait_for_url(re.compile(r"source=src%2Fapi%2Fbilling\.ts&version=v1"))
    expect(page.locator("table.runs tbody tr")).to_have_count(1)
    held = row("demo-migration-200-files").locator("a.held-at")
    click(held, held.inner_text().strip(), job)
    page.wait_for_url(re.compile(r"/calls/\d+/$"))
    settle(page)
    held_call = Call.objects.get(id=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert held_call.run == migration
    assert "file:src/api/billing.ts@v1" in page.locator("#items").inner_text()
    page.locator("#notes form.note-form textarea").fill("The old billing.ts (v1) is in this window.")
    click(page.locator("#notes form.note-form").get_by_role("button", name="Add note"), "Add note", job)
    page.locator("#notes article.note", has_text="The old billing.ts (v1)").wait_for()
    assert job == ["Filter", f"held at call {held_call.seq}", "Add note"]
    assert Note.objects.get(run=migration).call == held_call
    assert page.console.errors == []


def test_notes_and_the_bookmark_are_written_on_the_call_page_and_the_item_page(
    live_server, browser_page, chromium, alice, project, key
):
    run = three_call_run(live_server, key, "notes-run")
    calls = {call.seq: call for call in run.calls.all()}
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")

    def write_and_edit(first: str, second: str) -> None:
        """Add a note in the notes card, edit it, open its history: all in place (htmx)."""
        card = page.locator("#notes")
        card.locator("form.note-form textarea").fill(first)
        card.get_by_role("button", name="Add note").click()
        expect(page.locator("#notes article.note .note-body")).to_have_text(first)
        page.locator("#notes .note-edit summary").click()
        page.locator("#notes .note-edit textarea").fill(second)
        page.locator("#notes .note-edit").get_by_role("button", name="Save").click()
        expect(page.locator("#notes article.note > .note-body")).to_have_text(second)
        page.locator("#notes .note-history summary").click()
        expect(page.locator("#notes .note-history")).to_contain_text(first)

    # The call page: a note (hostile text stays text), its edit and history, the bookmark; no reload.
    page.goto(f"{base}/calls/{calls[2].id}/")
    settle(page)
    page.evaluate("window.stillTheSamePage = true")
    write_and_edit("<img src=x onerror=alert(7)> first look", "second look")
    page.locator("#notes").get_by_role("button", name="☆ Bookmark this call").click()
    expect(page.locator("#notes .bookmarked")).to_have_text("★ Bookmarked")
    assert page.evaluate("window.stillTheSamePage") is True
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    screenshot(page.locator("#notes"), "call-notes")
    page.reload()
    settle(page)
    assert page.locator("#notes article.note > .note-body").inner_text() == "second look"
    assert "History (1 earlier text)" in page.locator("#notes .note-history summary").inner_text()
    page.locator("#notes .note-history summary").click()
    assert "<img src=x onerror=alert(7)> first look" in page.locator("#notes .note-history").inner_text()
    assert page.locator("#notes .bookmarked").is_visible()
    assert page.locator(".links .notes-link").inner_text() == "✎ 1 note · ★ bookmarked"
    note = Note.objects.get(run=run)
    assert (note.call, note.body, note.revisions.count()) == (calls[2], "second look", 1)
    assert Bookmark.objects.get().call == calls[2]

    # The item page, from the call's items table: the notes on that item.
    page.locator("#items td.item-id a", has_text="system:prompt").click()
    page.wait_for_url(re.compile(r"/item\?id=system%3Aprompt$"))
    settle(page)
    # The whole page was swapped, not the items table only: one notes card, the item's.
    expect(page.locator("#notes")).to_have_count(1)
    assert page.locator("h1").inner_text() == "Item system:prompt"
    write_and_edit("the prompt never changes", "the prompt never changes, so it stays cached")
    page.reload()
    settle(page)
    assert "so it stays cached" in page.locator("#notes article.note > .note-body").inner_text()
    assert "History (1 earlier text)" in page.locator("#notes .note-history summary").inner_text()
    assert Note.objects.get(run=run, item_id="system:prompt").revisions.count() == 1
    assert page.console.errors == [] and page.console.dialogs == []

    # Without JavaScript the card's form is a plain POST that comes back to the card.
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    plain = context.new_page()
    login(plain, base, "alice", "pw-alice")
    plain.goto(f"{base}/calls/{calls[3].id}/")
    plain.locator("#notes form.note-form textarea").fill("written without JavaScript")
    plain.locator("#notes form.note-form").get_by_role("button", name="Add note").click()
    plain.wait_for_url(f"{base}/calls/{calls[3].id}/#notes")
    assert plain.locator("#notes article.note .note-body").inner_text() == "written without JavaScript"
    context.close()
