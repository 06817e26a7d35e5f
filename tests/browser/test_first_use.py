"""What got in a new user's way (issue 17), in a real browser on the demo runs: a break by removed items
said in words, the breaks by cause with every break reachable, occurrences on the findings timeline,
whole-number ticks on a short run, no page wider than the window nor a word broken in two at 1280 and
1440 px, the overview without JavaScript (and its panels rendered by the server on request), the dark theme
and the jump box."""

import re
from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

import ctxview_sdk
from ctxview.panels import run_panels
from ingest.models import Call, Run
from tests import factories
from tests.browser.conftest import login, screenshot, settle

# How far the page is wider than the window, and the words (split at spaces and after the separators a
# path or an id may wrap at) whose text lies on more than one line.
LAYOUT = r"""() => {
  const broken = [];
  const root = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const el = node.parentElement;
    // Prose and content may wrap anywhere they need to; charts draw their own text.
    if (!el || !el.offsetParent) continue;
    if (el.closest('pre, textarea, script, .plot, svg, .note-body, .help')) continue;
    const re = /[^\s\/:._\-@,=]+[\/:._\-@,=]?/g;
    let m;
    while ((m = re.exec(node.textContent))) {
      if (m[0].length < 4) continue;
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (lines.size > 1) broken.push(`${m[0]} in <${el.tagName.toLowerCase()} class="${el.className}">`);
    }
  }
  return {overflow: document.documentElement.scrollWidth - window.innerWidth, broken: broken.slice(0, 10)};
}"""
TICKS = "id => [...document.querySelectorAll(`#${id} .xtick text`)].map(t => t.textContent)"


def demo_runs(live_server, project, key) -> dict[str, Run]:
    call_command("demo", url=live_server.url, key=key, stdout=StringIO())
    Run.objects.filter(project=project).update(updated_at=timezone.now() - timedelta(hours=1))
    return {run.key: run for run in Run.objects.filter(project=project)}


def first_break(run: Run, **detail) -> Call:
    broken = factories.calls_with_cache(run.calls.all(), broke=True, **detail)
    return broken[0] if broken else None


def test_breaks_said_in_words_summed_by_cause_and_every_one_reachable(
    live_server, browser_page, alice, project, key
):
    runs = demo_runs(live_server, project, key)
    page, base = browser_page, live_server.url
    login(page, base, "alice", "pw-alice")

    # A sliding window removed items: the break names them and their reason, and shows no byte diff.
    incident = runs["demo-incident-turn-40"]
    removed = first_break(incident, change="removed")
    page.goto(f"{base}/calls/{removed.id}/")
    story = page.locator(".break-box .rewrite-story")
    gone = removed.analysis["cache"]["detail"]["removed_item_id"]
    # One item ("… was removed") or several ("… and N more items were removed"), with the window's reason.
    assert re.search(
        rf"{re.escape(gone)} (was|and \d+ more items? were) removed \(sliding_window\)", story.inner_text()
    )
    assert page.locator(".break-box pre.diff").count() == 0
    # Items inserted before the cached end (the order-service run's files): listed, no diff either.
    timeout = runs["demo-order-service-timeout"]
    inserted = first_break(timeout, change="inserted")
    page.goto(f"{base}/calls/{inserted.id}/")
    assert "Inserted:" in page.locator(".break-box .rewrite-story").inner_text()
    assert page.locator(".break-box pre.diff").count() == 0
    screenshot(page.locator(".break-box"), "break-removed-items")

    # The migration run: breaks by cause above the list, with the accounting's totals.
    migration = runs["demo-migration-200-files"]
    accounting = migration.accounting
    page.goto(f"{base}/runs/{migration.id}/")
    settle(page)
    rows = page.locator("#cache-body table.by-cause tbody tr")
    by_cause = accounting["cache_breaks"]["by_cause"]
    assert rows.count() == len(by_cause)
    for cause, entry in by_cause.items():
        row = rows.filter(has_text=cause).inner_text()
        assert f"{entry['count']:,}" in row and f"{entry['tokens_rewritten']:,} tokens" in row
    cost = accounting["cost_usd"]
    verdict = page.locator("#cache-body .verdict").inner_text()
    assert ("Caching costs more than it saves" in verdict) == (cost["with_cache"] > cost["without_cache"])
    screenshot(page.locator("#panel-cache"), "cache-by-cause")

    # Every break, page by page through the pager (htmx swaps the panel), each listed once.
    page.click("#cache-breaks summary")
    seen: list[int] = []
    while True:
        shown = page.locator("#cache-breaks tbody td:first-child").all_inner_texts()
        seen += [int(text) for text in shown]
        following = page.locator("#cache-breaks .pager a", has_text="next breaks")
        if not following.count():
            break
        following.click()
        page.wait_for_function(
            "first => { const td = document.querySelector('#cache-breaks tbody td');"
            " return td && td.textContent.trim() !== first; }",
            arg=shown[0],
        )
        settle(page)
    broken = [call.seq for call in factories.calls_with_cache(migration.calls.all(), broke=True)]
    assert seen == broken and len(seen) == accounting["cache_breaks"]["count"]

    # The findings: what a finding counts, and each further break drawn as an occurrence.
    group = page.locator("#findings-body .finding-group", has_text="cache_invalidated")
    findings = migration.findings.filter(type="cache_invalidated").count()
    summary = group.locator("summary").inner_text()
    assert f"× {findings}" in summary and f"{len(broken)} occurrences" in summary
    occurrences = page.evaluate(
        "() => document.getElementById('plot-findings').data.find(t => t.name === 'occurrence').x.length"
    )
    assert occurrences == len(broken) - findings
    assert page.console.errors == []


def test_no_page_is_wider_than_the_window_or_breaks_a_word(live_server, chromium, alice, project, key):
    runs = demo_runs(live_server, project, key)
    incident, migration = runs["demo-incident-turn-40"], runs["demo-migration-200-files"]
    timeout = runs["demo-order-service-timeout"]
    paths = [
        "/",
        "/projects/alpha/",
        "/projects/alpha/runs/",
        "/projects/alpha/settings",
        *(f"/runs/{run.id}/" for run in runs.values()),
        f"/runs/{incident.id}/review",
        f"/runs/{incident.id}/explain?turn=40",
        f"/runs/{timeout.id}/compare?a=9&b=10",
        f"/runs/{incident.id}/item?id=fact%3Aaffected-shard",
        # The calls with the longest ids and sources (files, tool names) in their items table.
        *(f"/calls/{call.id}/" for call in (first_break(timeout, change="inserted"), migration.calls.last())),
    ]
    for width in (1280, 1440):
        context = chromium.new_context(viewport={"width": width, "height": 900}, device_scale_factor=1)
        page = context.new_page()
        login(page, live_server.url, "alice", "pw-alice")
        for path in paths:
            page.goto(live_server.url + path)
            settle(page)
            layout = page.evaluate(LAYOUT)
            assert layout == {"overflow": 0, "broken": []}, (width, path)
        if width == 1280:
            page.goto(f"{live_server.url}/projects/alpha/settings")
            screenshot(page, "settings")
        context.close()


def test_the_overview_without_javascript_says_so(live_server, chromium, alice, project, key):
    runs = demo_runs(live_server, project, key)
    run = runs["demo-incident-turn-40"]
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=False)
    page = context.new_page()
    login(page, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/runs/{run.id}/")
    note = page.locator("p.noscript")
    assert note.is_visible() and "JavaScript" in note.inner_text()
    # The figures that need no script are there; no panel promises a load that never comes.
    assert page.locator(".kpis strong").first.inner_text() == f"{run.call_count:,}"
    loading = page.locator(".panel-body .loading").all()
    assert len(loading) == len(run_panels()) and not any(el.is_visible() for el in loading)
    assert note.locator("a", has_text="review page").get_attribute("href") == f"/runs/{run.id}/review"
    screenshot(page, "run-overview-no-js", docs=False)
    # One click more: the server renders every panel into the page; the tables read without a script.
    note.locator("a.server-panels").click()
    page.wait_for_url(f"{live_server.url}/runs/{run.id}/?panels=server")
    assert page.locator(".panel-body .loading").count() == 0
    assert "history_rewritten" in page.locator("#cache-body").inner_text()
    assert "fact_dropped" in page.locator("#findings-body").inner_text()
    assert page.locator("#calls-body table tbody tr").count() > 0
    screenshot(page, "run-overview-server-panels", docs=False)
    context.close()


def test_a_three_call_run_gets_whole_number_ticks_in_the_dark(live_server, chromium, alice, project, key):
    ctxview_sdk.configure(live_server.url, key=key, service_name="short-agent", send_content=True)
    try:
        for turn in (1, 2, 3):
            with ctxview_sdk.call("short-run", turn, "claude-sonnet-4-5") as c:
                c.add_item(
                    "system:prompt", "system", "system", content="You help.", role="system", tokens=1200
                )
                for n in range(1, turn + 1):
                    c.add_item(f"msg:{n}", "message", "conversation", content="hi", role="user", tokens=50)
                c.set_usage(
                    {
                        "input_tokens": 40,
                        "cache_creation_input_tokens": 1250 if turn == 1 else 50,
                        "cache_read_input_tokens": 0 if turn == 1 else 1200,
                        "output_tokens": 20,
                    }
                )
        assert ctxview_sdk.flush(timeout=30)
    finally:
        ctxview_sdk.shutdown(timeout=10)
    run = Run.objects.get(project=project, key="short-run")
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page = context.new_page()
    login(page, live_server.url, "alice", "pw-alice")
    page.goto(f"{live_server.url}/runs/{run.id}/")
    settle(page)
    for plot in ("plot-composition", "plot-cache", "plot-presence"):
        ticks = page.evaluate(TICKS, plot)
        assert ticks == ["1", "2", "3"], (plot, ticks)
    # The dark theme: the page and the charts take the dark palette.
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert [int(v) for v in re.findall(r"\d+", background)][:3] == [16, 20, 28]
    paper = page.evaluate("document.getElementById('plot-cache')._fullLayout.paper_bgcolor")
    assert paper != "#ffffff" and paper != "rgb(255, 255, 255)"
    screenshot(page, "run-overview-dark")

    # The jump box, from the keyboard: "/" then a call number of this run.
    page.keyboard.press("/")
    page.keyboard.type("#2")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/calls/{run.calls.get(seq=2).id}/")
    assert page.title().startswith("Call 2 ")
    context.close()
