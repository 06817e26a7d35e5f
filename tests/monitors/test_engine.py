"""The evaluation tick's state machine: one alert per episode, resolved when the scope recovers, the
cool-down, muting, a second tick at once, and deliveries retried a bounded number of times."""

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from ctxview.models import AlertEpisode, Delivery, Monitor, OutboundGrant
from ctxview.monitors import channels, engine
from ctxview.monitors.writes import create_monitor
from ingest.rollups import minute_of
from tests import factories
from tests.monitors.helpers import START, post, request_of, run_spans

pytestmark = pytest.mark.django_db

T0 = minute_of(START)


@pytest.fixture
def alpha(alice):
    return factories.project_with_key("alpha", owner=alice)


@pytest.fixture
def send(client, alpha, django_capture_on_commit_callbacks):
    def send(spans):
        with django_capture_on_commit_callbacks(execute=True):
            post(client, alpha[1], request_of(spans))

    return send


def at(minutes: float):
    return T0 + timedelta(minutes=minutes)


def tick(minutes: float, capture):
    with capture(execute=True):
        return engine.evaluate(now=at(minutes))


def test_a_new_cause_fires_once_with_its_item_then_resolves_after_the_fix(
    alpha, alice, send, django_capture_on_commit_callbacks
):
    project = alpha[0]
    send(run_spans(0, 8))  # no break
    monitor, _ = create_monitor(
        project,
        alice,
        {
            "name": "new cause",
            "kind": "cache_break_cause",
            "channels": [{"type": "email", "to": "oncall@example.com"}],
        },
    )
    assert tick(2, django_capture_on_commit_callbacks)["opened"] == 0
    send(run_spans(1, 10, volatile_from=4, start=START + 3 * 60 * 10**9))  # a time line added at call 4
    assert tick(5, django_capture_on_commit_callbacks)["opened"] == 1
    for minutes in (5, 6, 6):  # the same tick again, and the next: nothing more is sent
        assert tick(minutes, django_capture_on_commit_callbacks)["opened"] == 0
    episode = AlertEpisode.objects.get(monitor=monitor)
    assert episode.cause["name"] == "system_changed" and episode.cause["seq"] == 4
    assert episode.cause["item_kind"] == "system"
    assert episode.cause["names"] == ["system_changed", "volatile_system_prompt"]
    assert episode.evidence["occurrences"] == 7 and episode.evidence["cost_usd"] >= 0
    assert len(mail.outbox) == 1
    assert (
        "system_changed" in mail.outbox[0].subject and "[firing] new cause (alpha)" in mail.outbox[0].subject
    )
    monitor.refresh_from_db()
    assert monitor.state == "firing"

    send(run_spans(2, 5, start=START + 8 * 60 * 10**9))  # the prompt fixed: a clean run, later
    assert tick(10, django_capture_on_commit_callbacks)["resolved"] == 1
    episode.refresh_from_db()
    assert episode.resolved_at == at(10)
    assert [message.subject.split("]")[0] for message in mail.outbox] == ["[firing", "[resolved"]
    assert Delivery.objects.filter(episode=episode, sent_at__isnull=False).count() == 2


def test_no_alert_without_a_regression(alpha, alice, send, django_capture_on_commit_callbacks):
    project = alpha[0]
    for kind, params in (
        ("cache_break_cause", {}),
        ("finding_type", {"type": "fact_dropped"}),
        ("window_size", {"above_tokens": 10**6}),
    ):
        create_monitor(project, alice, {"name": kind, "kind": kind, "params": params})
    send(run_spans(0, 20))
    send(run_spans(1, 20, start=START + 60 * 10**9))
    for minutes in range(0, 10, 3):
        assert tick(minutes, django_capture_on_commit_callbacks)["opened"] == 0
    assert not AlertEpisode.objects.exists()


def test_a_threshold_waits_out_its_cooldown(alpha, alice, send, django_capture_on_commit_callbacks):
    monitor, _ = create_monitor(
        alpha[0],
        alice,
        {
            "name": "big",
            "kind": "window_size",
            "params": {"above_tokens": 100, "window_minutes": 30},
            "cooldown_minutes": 10,
        },
    )
    send(run_spans(0, 3))
    assert tick(1, django_capture_on_commit_callbacks)["opened"] == 1
    assert tick(40, django_capture_on_commit_callbacks)["resolved"] == 1
    send(run_spans(1, 3, start=START + 41 * 60 * 10**9))
    assert tick(42, django_capture_on_commit_callbacks) == {
        "evaluated": 1,
        "opened": 0,
        "resolved": 0,
    }  # cooling
    assert tick(51, django_capture_on_commit_callbacks)["opened"] == 1
    assert AlertEpisode.objects.filter(monitor=monitor).count() == 2


def test_a_muted_monitor_opens_episodes_but_sends_nothing(
    alpha, alice, send, django_capture_on_commit_callbacks
):
    monitor, _ = create_monitor(
        alpha[0],
        alice,
        {
            "name": "big",
            "kind": "window_size",
            "params": {"above_tokens": 100},
            "channels": [{"type": "email", "to": "a@example.com"}],
            "mute_minutes": 60,
        },
    )
    Monitor.objects.filter(id=monitor.id).update(muted_until=at(60))
    send(run_spans(0, 3))
    assert tick(1, django_capture_on_commit_callbacks)["opened"] == 1
    assert tick(45, django_capture_on_commit_callbacks)["resolved"] == 1
    assert AlertEpisode.objects.get().muted and not Delivery.objects.exists() and mail.outbox == []


class Receiver(BaseHTTPRequestHandler):
    status = 200
    received: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), body))
        self.send_response(type(self).status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver(settings, alpha):
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    settings.CTXVIEW_OUTBOUND_ALLOW = ["127.0.0.1"]
    OutboundGrant.objects.create(project=alpha[0])
    handler = type("Handler", (Receiver,), {"received": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield handler, f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()
    server.server_close()


def test_deliveries_are_retried_a_bounded_number_of_times(
    alpha, alice, receiver, send, django_capture_on_commit_callbacks
):
    handler, url = receiver
    handler.status = 500
    monitor, made = create_monitor(
        alpha[0],
        alice,
        {
            "name": "big",
            "kind": "window_size",
            "params": {"above_tokens": 100},
            "channels": [{"type": "webhook", "url": url}],
        },
    )
    send(run_spans(0, 3))
    assert tick(1, django_capture_on_commit_callbacks)["opened"] == 1  # the first attempt, in-process
    delivery = Delivery.objects.get()
    now = delivery.next_attempt_at
    for _ in range(10):  # the retries' waits over (and more ticks after it gave up)
        now += timedelta(minutes=11)
        engine.send_due(now)
        engine.deliver(delivery.id, now=now)
    delivery.refresh_from_db()
    assert delivery.attempts == engine.MAX_ATTEMPTS == len(handler.received)
    assert delivery.next_attempt_at is None and delivery.sent_at is None
    assert "HTTP 500" in delivery.last_error
    # The signature: HMAC-SHA256 of the body with the secret made for the channel.
    headers, body = handler.received[0]
    assert headers["X-Ctxview-Signature"] == channels.sign(body, made[0])
    assert json.loads(body)["state"] == "firing"


def test_a_test_fire_goes_to_every_channel_and_leaves_the_state(
    alpha, alice, receiver, django_capture_on_commit_callbacks
):
    handler, url = receiver
    monitor, made = create_monitor(
        alpha[0],
        alice,
        {
            "name": "t",
            "kind": "cache_break_cause",
            "channels": [
                {"type": "webhook", "url": url, "secret": "s3cret-value"},
                {"type": "email", "to": "b@example.com"},
            ],
        },
    )
    with django_capture_on_commit_callbacks(execute=True):
        episode = engine.test_fire(monitor)
    assert [d.sent_at is not None for d in episode.deliveries.order_by("channel")] == [True, True]
    headers, body = handler.received[0]
    assert headers["X-Ctxview-Signature"] == channels.sign(body, "s3cret-value")
    assert json.loads(body)["test"] is True
    monitor.refresh_from_db()
    assert monitor.state == "ok" and len(mail.outbox) == 1
