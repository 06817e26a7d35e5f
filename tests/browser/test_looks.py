"""How the demo's pages look in both themes at 1,440 px (issue 36): every text readable against what is
behind it (WCAG's 4.5:1, 3:1 for large text), and no page wider than the window — the Replay page with six
probes included, whose table scrolls inside its own box."""

import re

import pytest

from ctxview.models import Probe
from tests.browser.conftest import login, settle
from tests.browser.test_first_use import LAYOUT, demo_runs, first_break

# Each visible text's colour against the first opaque background behind it (the page's when none is),
# both blended with their opacity; the texts under WCAG's ratio, at most 12 of them, with where they are.
CONTRAST = r"""() => {
  const rgba = text => {
    const m = text.match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const [r, g, b, a] = m[1].split(',').map(Number);
    return [r, g, b, a === undefined || Number.isNaN(a) ? 1 : a];
  };
  const over = (top, bottom) => [0, 1, 2].map(i => top[i] * top[3] + bottom[i] * (1 - top[3])).concat(1);
  const background = el => {
    const layers = [];
    for (let node = el; node; node = node.parentElement) {
      const colour = rgba(getComputedStyle(node).backgroundColor);
      if (colour && colour[3] > 0) { layers.push(colour); if (colour[3] === 1) break; }
    }
    let result = [255, 255, 255, 1];
    if (!layers.length || layers[layers.length - 1][3] < 1) {
      result = rgba(getComputedStyle(document.documentElement).backgroundColor) || result;
      if (result[3] === 0) result = [255, 255, 255, 1];
    }
    for (const layer of layers.reverse()) result = over(layer, result);
    return result;
  };
  const luminance = c => {
    const linear = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    const [r, g, b] = c.slice(0, 3).map(linear);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const low = [];
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || seen.has(el) || !el.offsetParent) continue;
    seen.add(el);
    if (el.closest('svg, .plot, script, style, option, [aria-hidden=true]')) continue;
    const style = getComputedStyle(el);
    if (style.visibility !== 'visible' || Number(style.opacity) === 0) continue;
    const bg = background(el);
    const fg = over(rgba(style.color), bg);
    const [a, b] = [luminance(fg), luminance(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
    const needed = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < needed) {
      const where = `<${el.tagName.toLowerCase()} class="${el.className}">`;
      low.push(`${ratio.toFixed(2)} ${style.color} on rgb(${bg.slice(0, 3).map(Math.round)}): ` +
               `${where} ${node.textContent.trim().slice(0, 30)}`);
    }
  }
  return [...new Set(low)].slice(0, 12);
}"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_is_readable_and_no_page_scrolls_sideways(
    live_server, chromium, alice, project, key, scheme
):
    runs = demo_runs(live_server, project, key)
    incident, migration = runs["demo-incident-turn-40"], runs["demo-migration-200-files"]
    timeout = runs["demo-order-service-timeout"]
    for number, value in enumerate(("shard-7", "pay-shard", "ticket-owner", "rollback", "on-call", "p99")):
        Probe.objects.create(project=project, run=incident, kind="text", value=f"{value}-{number}-long-probe")
    paths = [
        "/projects/alpha/runs/",
        "/projects/alpha/settings",
        *(f"/runs/{run.id}/" for run in runs.values()),
        f"/runs/{incident.id}/replay",
        f"/runs/{incident.id}/review",
        f"/runs/{incident.id}/explain?turn=40",
        f"/runs/{timeout.id}/compare?a=9&b=10",
        *(f"/calls/{call.id}/" for call in (first_break(timeout, change="inserted"), migration.calls.last())),
        f"/calls/{first_break(migration).id}/",
    ]
    context = chromium.new_context(
        viewport={"width": 1440, "height": 900}, device_scale_factor=1, color_scheme=scheme
    )
    page = context.new_page()
    login(page, live_server.url, "alice", "pw-alice")
    found = {}
    for path in paths:
        page.goto(live_server.url + path)
        settle(page)
        overflow = page.evaluate(LAYOUT)["overflow"]
        low = page.evaluate(CONTRAST)
        if overflow or low:
            found[path] = {"overflow": overflow, "low contrast": low}
    context.close()
    assert found == {}, found


def test_the_three_jobs_take_two_clicks_each_from_the_landing_page(
    live_server, browser_page, alice, project, key
):
    """Issue 36: from where login lands (the runs of the user's most recent project), each job the product
    is for, on the demo, in at most two clicks; each click below is one a user makes."""
    runs = demo_runs(live_server, project, key)
    page, base = browser_page, live_server.url
    clicks: dict[str, int] = {}
    made = []

    def land() -> None:
        page.context.clear_cookies()
        login(page, base, "alice", "pw-alice")
        assert page.url == f"{base}/projects/alpha/runs/"
        made.clear()

    def click(target) -> None:
        target.click()
        made.append(target)

    # 1. "It got stupid at turn 40": the incident run, then the dropped fact's finding, on its call.
    land()
    click(page.locator(f"td.run-name a[href='/runs/{runs['demo-incident-turn-40'].id}/']"))
    settle(page)
    finding = page.locator("#findings-body details.finding-group", has_text="fact_dropped").locator("a").first
    click(finding)
    page.wait_for_url(re.compile(r"/calls/\d+/"))
    clicks["why the agent forgot"] = len(made)
    assert "fact_dropped" in page.locator("main").inner_text()

    # 2. "The cache stopped hitting and the bill tripled": the cause, the item and what it cost, on the run.
    land()
    click(page.locator(f"td.run-name a[href='/runs/{runs['demo-migration-200-files'].id}/']"))
    settle(page)
    row = page.locator("#cache-body table.by-cause tbody tr", has_text="volatile_system_prompt")
    assert "$" in row.inner_text()  # the cause and what it cost, on the run's page
    click(row.locator("td.nowrap a").first)  # its first break
    page.wait_for_url(re.compile(r"/calls/\d+/"))
    box = page.locator(".break-box").inner_text()
    assert "Cache broken: volatile_system_prompt" in box and "system:prompt" in box and "$" in box
    clicks["what broke the cache and its cost"] = len(made)

    # 3. "What was in the window at that call": the run, then the call, its items in order.
    land()
    click(page.locator(f"td.run-name a[href='/runs/{runs['demo-order-service-timeout'].id}/']"))
    settle(page)
    click(page.locator("#calls-body table tbody tr td:first-child a").first)
    page.wait_for_url(re.compile(r"/calls/\d+/"))
    assert page.locator("#items-card table tbody tr").count() > 0
    clicks["what the model saw at a call"] = len(made)
    print("clicks from the landing page:", clicks)
    assert max(clicks.values()) <= 2 and len(runs) >= 4
