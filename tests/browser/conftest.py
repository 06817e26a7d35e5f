"""Browser tests: Playwright (sync API) driving Debian's chromium against the live test server.

No browser is downloaded: the Playwright package's driver launches /usr/bin/chromium (installed by
.ci/run; CTXVIEW_CHROMIUM overrides the path). Screenshots of each screen go to test-artifacts/screens/;
with CTXVIEW_UPDATE_SCREENSHOTS=1 they are also copied to docs/screenshots/ for the README.
"""

import os
import shutil
from pathlib import Path

import pytest

from tests import services

CHROMIUM = os.environ.get("CTXVIEW_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENS = ROOT / "test-artifacts" / "screens"
DOCS = ROOT / "docs" / "screenshots"


@pytest.fixture(scope="module")
def chromium():
    if not Path(CHROMIUM).exists():
        services.require(f"chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        services.require("the playwright package (pip install -e '.[dev]')")
    # Playwright's sync API keeps an event loop on this thread while it runs; the tests' and fixtures'
    # database calls are ordinary synchronous code, so Django's guard against ORM calls from async code
    # does not apply. Only while the browser is up: the variable must not leak into other tests.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class Console:
    """What the page logged: errors and uncaught exceptions fail the test that checks them."""

    def __init__(self, page):
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        page.on("dialog", self._dialog)

    def _dialog(self, dialog):
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture
def browser_page(chromium):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.console = Console(page)
    yield page
    context.close()


def login(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    # Landed: on the runs of the user's most recently active project, or the projects page.
    page.wait_for_url(lambda url: url.startswith(base_url) and "/login/" not in url)


def screenshot(target, name: str, docs: bool = True) -> Path:
    """Save a screenshot of a page (whole) or a locator under test-artifacts/screens/, and under
    docs/screenshots/ too (the README's) when CTXVIEW_UPDATE_SCREENSHOTS=1 and ``docs``."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    path = SCREENS / f"{name}.png"
    if hasattr(target, "goto"):
        target.screenshot(path=str(path), full_page=True)
    else:
        target.screenshot(path=str(path))
    if docs and os.environ.get("CTXVIEW_UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS / path.name)
    return path


SETTLED = (
    "() => document.readyState === 'complete' && !document.querySelector('.htmx-request')"
    " && [...document.querySelectorAll('[data-figure]')].every(el => el.dataset.drawn === 'ready')"
)


def settle(page) -> None:
    """Wait until the page is loaded and htmx and plotly are done: no request in flight, every figure
    drawn, and still so 100 ms later (content a swap brings in may start requests of its own).

    Not Playwright's "networkidle": it waits 500 ms of silence after every page, which the ~150 pages
    the browser tests visit pay in over a minute, and it knows nothing of figures drawn."""
    while True:
        page.wait_for_function(SETTLED)
        page.wait_for_timeout(100)
        if page.evaluate(SETTLED):
            return
