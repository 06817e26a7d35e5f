"""Re-ask attacked through a live gunicorn on PostgreSQL: the settings page refuses every spelling of
loopback (nothing connects), and a trickling endpoint asked ten times at once holds one thread for the
re-ask deadline while another user's pages keep answering."""

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.test import Client

from ctxview import writes
from ctxview.models import OutboundGrant, ReaskEndpoint
from ingest.models import Run
from tests import factories, services
from tests.ctxview import ui_data
from tests.ctxview.test_outbound import FAKE_HOST, KEY, Listener, loopback_spellings, serve, trickle

pytestmark = [pytest.mark.timing, pytest.mark.services, pytest.mark.django_db(transaction=True)]

DEADLINE = 3  # CTXVIEW_REASK_DEADLINE_SECONDS of the server started here


@pytest.fixture(scope="module")
def web(service_env):
    env = service_env | {
        "CTXVIEW_OUTBOUND_ENABLED": "true",
        "CTXVIEW_OUTBOUND_ALLOW": FAKE_HOST,
        "CTXVIEW_REASK_DEADLINE_SECONDS": str(DEADLINE),
    }
    process, url = services.start_web(env, name="web-outbound", server="gunicorn")
    yield url
    process.stop()


def session_for(user) -> requests.Session:
    """A requests session logged in as ``user`` (the session row is in the shared test database)."""
    client = Client()
    client.force_login(user)
    session = requests.Session()
    session.cookies.set("sessionid", client.cookies["sessionid"].value)
    return session


def post_form(session: requests.Session, url: str, page: str, action: str, form: dict) -> str:
    html = session.get(page, timeout=10).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    answer = session.post(
        action, {**form, "csrfmiddlewaretoken": token}, headers={"Referer": page, "Origin": url}, timeout=10
    )
    assert answer.status_code == 200, answer.status_code  # the settings page again, with its message
    return answer.text


def test_the_live_settings_page_refuses_every_spelling_of_loopback(web):
    admin = factories.user("live-admin")
    project, _ = factories.project_with_key("live", owner=admin)
    OutboundGrant.objects.create(project=project)
    session, listener = session_for(admin), Listener()
    page = f"{web}/projects/{project.slug}/settings"
    try:
        for base_url in loopback_spellings(listener.port):
            form = {"provider": "openai", "base_url": base_url, "model": "m", "key": KEY}
            answer = post_form(session, web, page, f"{page}/reask", form)
            assert "base_url: " in answer and "public addresses" in answer, base_url
        time.sleep(0.3)
        assert listener.accepted == 0
    finally:
        listener.close()
    assert not ReaskEndpoint.objects.exists()


def test_a_trickling_endpoint_holds_one_thread_until_the_deadline_and_other_pages_answer(web, settings):
    settings.CTXVIEW_OUTBOUND_ENABLED, settings.CTXVIEW_OUTBOUND_ALLOW = True, [FAKE_HOST]  # this process
    admin = factories.user("live-owner")
    project, ingest_key = factories.project_with_key("reask-live", owner=admin)
    ui_data.post(ui_data.demo_requests(), ingest_key)
    run = Run.objects.get(project=project, key="demo-incident-turn-40")
    OutboundGrant.objects.create(project=project)
    endpoint = serve(trickle)
    writes.set_reask_endpoint(
        project,
        admin,
        provider="anthropic",
        base_url=f"http://{FAKE_HOST}:{endpoint.server_port}",
        model="m",
        key=KEY,
    )
    other = factories.user("live-bystander")
    elsewhere, _ = factories.project_with_key("bystander", owner=other)
    asker, bystander = session_for(admin), session_for(other)

    latencies: list[float] = []
    done = threading.Event()

    def browse():
        while not done.is_set():
            started = time.monotonic()
            assert bystander.get(f"{web}/projects/{elsewhere.slug}/settings", timeout=10).status_code == 200
            latencies.append(time.monotonic() - started)
            time.sleep(0.1)

    def ask(_):
        started = time.monotonic()
        answer = asker.get(
            f"{web}/api/v1/runs/{run.id}/replay",
            params={"policies": "full", "ask": "Which shard?", "expect": "pay-shard-7"},
            timeout=60,
        )
        assert answer.status_code == 200, answer.text
        return time.monotonic() - started, answer.json()["policies"][0]["reask_reason"]

    browser = threading.Thread(target=browse, daemon=True)
    browser.start()
    try:
        with ThreadPoolExecutor(10) as pool:
            results = list(pool.map(ask, range(10)))
    finally:
        done.set()
        browser.join(15)
        endpoint.shutdown()
        endpoint.server_close()
    reasons = [reason for _, reason in results]
    took = [seconds for seconds, _ in results]
    print(f"re-asks: {sorted(round(s, 2) for s in took)} s", end="; ")
    print(f"bystander's page: max {max(latencies):.3f} s of {len(latencies)}")
    # One re-ask reached the endpoint and was released at the deadline; the others were told at once.
    assert sum("out of time" in reason for reason in reasons) == 1, reasons
    assert sum("already asking" in reason for reason in reasons) == 9, reasons
    assert len(endpoint.received) == 1
    assert max(took) < DEADLINE + 2, took
    assert latencies and max(latencies) < 1, latencies
