"""A real instrumentation feeding a live server: ``opentelemetry-instrumentation-openai-v2`` around the
OpenAI SDK, against the local fake provider. A monitor of new cache-break causes fires once when a
volatile date line is added to the system prompt (a signed webhook to a local server, and an email),
and resolves once a run with the prompt fixed comes in. The demo's run without a regression in a scope
sets off no monitor of it."""

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from ctxview import demo
from ctxview.demo import research
from ctxview.models import AlertEpisode, Delivery, OutboundGrant
from ctxview.monitors import channels, engine
from ctxview.monitors.writes import create_monitor
from ingest.models import Run
from tests.instrumented.scenarios import ROOT, child_environment
from tests.instrumented.test_instrumented import require_packages

pytestmark = pytest.mark.django_db(transaction=True)

STABLE = "You are the checkout agent. Answer from the runbook. " + "Rule: be exact. " * 120
DATED = STABLE + "\nCurrent date and time: 2026-05-01 10:00:0{n} UTC."


def drive(endpoint: str, key: str, runs: list[list[str]]) -> None:
    command = [sys.executable, "-m", "tests.monitors.agent", endpoint, key, json.dumps(runs)]
    done = subprocess.run(
        command, cwd=ROOT, env=child_environment(), capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-4000:]


class Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.headers.get(channels.SIGNATURE), body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def hook():
    handler = type("Handler", (Hook,), {"received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}/ctxview"
    server.shutdown()
    server.server_close()


def test_a_volatile_date_line_fires_once_and_resolves_when_fixed(
    live_server, project, key, alice, hook, settings
):
    require_packages("openai-v2-span")  # a failure, not a skip, where CI requires the instrumentations
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    settings.CTXVIEW_OUTBOUND_ALLOW = ["127.0.0.1"]
    OutboundGrant.objects.create(project=project)
    handler, url = hook
    drive(live_server.url, key, [[STABLE] * 4])  # yesterday's agent: a stable prefix
    monitor, made = create_monitor(
        project,
        alice,
        {
            "name": "cache breaks",
            "kind": "cache_break_cause",
            "params": {},
            "channels": [{"type": "webhook", "url": url}, {"type": "email", "to": "oncall@example.com"}],
        },
    )
    assert engine.evaluate()["opened"] == 0
    # The release adds the date and time to the system prompt.
    drive(live_server.url, key, [[STABLE, STABLE, *(DATED.format(n=n) for n in range(4))]])
    assert engine.evaluate()["opened"] == 1
    assert engine.evaluate() == {"evaluated": 1, "opened": 0, "resolved": 0}  # one alert per episode

    [(signature, body)] = handler.received
    assert signature == channels.sign(body, made[0])
    alert = json.loads(body)
    broken = Run.objects.filter(project=project).order_by("-id").first()
    assert (alert["state"], alert["project"], alert["cause"]) == ("firing", "alpha", "system_changed")
    assert alert["causes"] == ["system_changed", "volatile_system_prompt"]
    assert alert["run"]["id"] == broken.id and alert["run"]["url"].endswith(f"/runs/{broken.id}/")
    assert alert["call"]["seq"] == 3 and "/calls/" in alert["call"]["url"]
    assert alert["item"]["kind"] == "system" and "Current date and time" in alert["item"]["bytes"]["new"]
    assert alert["calls"] >= 6 and alert["tokens"] > 0 and alert["cost_usd"] > 0
    assert len(mail.outbox) == 1 and "system_changed" in mail.outbox[0].subject

    drive(live_server.url, key, [[STABLE] * 4])  # the prompt fixed
    assert engine.evaluate()["resolved"] == 1
    states = [json.loads(body)["state"] for _, body in handler.received]
    assert states == ["firing", "resolved"]
    assert [message.subject.split("]")[0] for message in mail.outbox] == ["[firing", "[resolved"]
    episode = AlertEpisode.objects.get(monitor=monitor)
    assert episode.resolved_at is not None
    assert Delivery.objects.filter(episode=episode, sent_at__isnull=False).count() == 4


def test_no_alert_on_the_demo_s_run_in_scopes_without_a_regression(live_server, project, key, alice):
    for name, kind, params, scope in (
        ("researcher breaks", "cache_break_cause", {}, {"agent": research.RESEARCHER}),
        ("researcher findings", "finding_type", {}, {"agent": research.RESEARCHER}),
        ("big windows", "window_size", {"above_tokens": 200_000}, {}),
        ("expensive", "cost_spike", {"above_usd": 100}, {}),
        ("hit rate", "hit_rate_drop", {"below": 0.05, "min_calls": 50}, {}),
    ):
        create_monitor(project, alice, {"name": name, "kind": kind, "params": params, "scope": scope})
    others = {story.RUN_ID for story in demo.STORIES if story is not research}
    assert demo.send(live_server.url, key, skip=others) == {research.RUN_ID: 6}
    assert engine.evaluate()["opened"] == 0
    assert not AlertEpisode.objects.exists()
