"""Every page and panel renders well-formed HTML: each element closed, in order (a template slip shows)."""

from html.parser import HTMLParser

import pytest

from tests import factories
from tests.ctxview import ui_fixtures

inspect = ui_fixtures.inspect
viewer_client = ui_fixtures.viewer_client

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Elements whose end tag HTML lets you leave out; our templates close them anyway, except these.
OPTIONAL_END = {"p", "li", "option", "tr", "td", "th", "thead", "tbody"}


class Balance(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack: list[str] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        pass

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        while self.stack and self.stack[-1] != tag and self.stack[-1] in OPTIONAL_END:
            self.stack.pop()
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(
                f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'} at {self.getpos()}"
            )
            return
        self.stack.pop()


def problems(html: str) -> list[str]:
    parser = Balance()
    parser.feed(html)
    parser.close()
    left = [tag for tag in parser.stack if tag not in OPTIONAL_END]
    return parser.problems + ([f"unclosed: {left}"] if left else [])


def paths(ui) -> list[str]:
    run, incident = ui.migration, ui.incident
    broken = factories.calls_with_cache(run.calls.all(), broke=True)[0]
    return [
        "/",
        "/projects/inspect/",
        "/projects/inspect/runs/",
        f"/runs/{incident.id}/",
        *[
            f"/runs/{incident.id}/panels/{slug}"
            for slug in ("composition", "agents", "cache", "findings", "presence", "calls")
        ],
        f"/runs/{run.id}/panels/presence",
        f"/runs/{incident.id}/explain?turn=40",
        f"/runs/{ui.timeout.id}/explain?turn=6",
        f"/runs/{incident.id}/compare?a=44&b=45",
        f"/runs/{run.id}/compare/item?a=30&b=31&item=system:prompt",
        f"/runs/{incident.id}/item?id=fact:affected-shard",
        f"/calls/{broken.id}/",
        f"/calls/{broken.id}/content?pos=0",
        f"/runs/{incident.id}/explain?turn=99",  # the 400 page
        "/runs/999999/",  # the 404 page
    ]


def test_every_page_and_panel_is_well_formed(viewer_client, inspect):
    for path in paths(inspect):
        for headers in ({}, {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "page"}):
            response = viewer_client.get(path, **headers)
            assert response.status_code in (200, 400, 404), path
            assert problems(response.content.decode()) == [], (path, headers)


@pytest.mark.parametrize("html", ["<div><span>a</div>", "<section><code></section>", "<main><div>"])
def test_the_checker_catches_a_slip(html):
    assert problems(html)
