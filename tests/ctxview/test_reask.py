"""Re-ask on the demo incident run, against local fakes of the Anthropic Messages API and of OpenAI's
chat completions: what each receives, the scores on the Replay page and in the API, and that nothing is
sent without a configured endpoint."""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxcore.replay import parse
from ctxview import sealing, writes
from ctxview.models import OutboundGrant, ReaskEndpoint
from ctxview.reask import question_from, reask_window
from ctxview.replay import replay_run, run_calls
from ctxview.writes import Refused
from ingest.models import Content, Membership
from tests import factories
from tests.ctxview import ui_fixtures

inspect = ui_fixtures.inspect
viewer_client = ui_fixtures.viewer_client

KEY = "sk-test-0123456789abcdef"
ASKS = ("Which shard is affected?", "Name the affected shard")


class FakeProvider(BaseHTTPRequestHandler):
    """Answers like a model that knows the shard only when its window holds it."""

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.received.append(
            {
                "path": self.path,
                "headers": {name.lower(): value for name, value in self.headers.items()},
                "body": body,
            }
        )
        if self.server.fail:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"overloaded")
            return
        window = json.dumps([body.get("system"), body["messages"][:-1]])
        text = "The affected shard is pay-shard-7." if "pay-shard-7" in window else "I don't know."
        if self.path == "/v1/messages":
            answer = {"type": "message", "content": [{"type": "text", "text": text}]}
        else:
            answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture(autouse=True)
def outbound_allowed(settings, inspect, db):
    """The operator turned outbound calls on, allowed the fakes' loopback address, and granted the
    project (tests/ctxview/test_outbound.py tests each rule)."""
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    settings.CTXVIEW_OUTBOUND_ALLOW = ["127.0.0.1"]
    OutboundGrant.objects.create(project=inspect.incident.project)


@pytest.fixture
def fake():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    server.received, server.fail = [], False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def configure(client, project, fake, provider: str) -> None:
    base = f"http://127.0.0.1:{fake.server_port}" + ("/v1" if provider == "openai" else "")
    response = client.post(
        f"/projects/{project.slug}/settings/reask",
        {"provider": provider, "base_url": base, "model": "fake-model", "key": KEY},
    )
    assert response.status_code == 302
    assert ReaskEndpoint.objects.get(project=project).provider == provider


def window_texts(run, spec: str) -> tuple[str, list[str]]:
    """The stored texts of the policy's window at the run's last call: the system items', the others'."""
    calls = run_calls(run)
    seq = calls[-1].seq
    window = replay_run(run, [parse(spec)], calls=calls, keep_windows=[seq])["policies"][0]["windows"][seq]
    stored = dict(Content.objects.filter(project=run.project).values_list("hash", "text"))
    system = [stored[slot.item.hash] for slot in window if slot.item.role == "system"]
    others = [stored[slot.item.hash] for slot in window if slot.item.role != "system"]
    return "\n\n".join(system), others


def test_anthropic_endpoint_gets_each_window_in_order_and_the_page_shows_the_scores(
    viewer_client, inspect, fake
):
    run = inspect.incident
    configure(viewer_client, run.project, fake, "anthropic")
    settings_page = viewer_client.get(f"/projects/{run.project.slug}/settings").content.decode()
    assert KEY not in settings_page and "…cdef" in settings_page

    response = viewer_client.get(
        f"/runs/{run.id}/replay",
        {"policies": "full,sliding_window:12", "ask": "|".join(ASKS), "expect": r"pay-shard-\d"},
    )
    assert response.status_code == 200
    assert len(fake.received) == 4  # two policies, two phrasings each
    for request, spec, ask in zip(
        fake.received, ["full"] * 2 + ["sliding_window:12"] * 2, ASKS * 2, strict=True
    ):
        assert request["path"] == "/v1/messages"
        assert request["headers"]["x-api-key"] == KEY
        assert request["headers"]["anthropic-version"] == "2023-06-01"
        body = request["body"]
        system, texts = window_texts(run, spec)
        assert body["model"] == "fake-model" and body.get("system", "") == system
        assert [message["content"] for message in body["messages"]] == [*texts, ask]
        assert body["messages"][-1]["role"] == "user"
    assert "pay-shard-7" in json.dumps(fake.received[0]["body"]["messages"][:-1])
    assert "pay-shard-7" not in json.dumps(fake.received[2]["body"]["messages"][:-1])

    body = response.content.decode()
    scores = dict(re.findall(r'data-policy="([^"]+)".*?<span class="reask-score">([^<]+)</span>', body, re.S))
    assert scores == {
        "full": "2 right · 0 wrong · 0 don't know",
        "sliding_window:12": "0 right · 0 wrong · 2 don't know",
    }


def test_openai_endpoint_through_the_api_and_a_summary_window_is_unavailable(viewer_client, inspect, fake):
    run = inspect.incident
    configure(viewer_client, run.project, fake, "openai")
    response = viewer_client.get(
        f"/api/v1/runs/{run.id}/replay",
        {"policies": "full,compaction:10", "ask": list(ASKS), "expect": "PAY-SHARD-7"},
    )
    assert response.status_code == 200
    policies = {entry["policy"]: entry for entry in response.json()["policies"]}
    assert policies["full"]["reask"] == {"right": 2, "wrong": 0, "unknown": 0}
    assert policies["compaction:10"]["reask"] is None
    assert "summary" in policies["compaction:10"]["reask_reason"]
    assert len(fake.received) == 2  # the compacted window is never sent
    system, texts = window_texts(run, "full")
    for request, ask in zip(fake.received, ASKS, strict=True):
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == f"Bearer {KEY}"
        messages = request["body"]["messages"]
        assert messages[0] == {"role": "system", "content": system}
        assert [message["content"] for message in messages[1:]] == [*texts, ask]


def test_without_an_endpoint_nothing_is_sent_and_the_page_says_how_to_configure_it(
    viewer_client, inspect, fake
):
    run = inspect.incident
    query = {"policies": "full", "ask": ASKS[0], "expect": "pay-shard-7"}
    body = viewer_client.get(f"/runs/{run.id}/replay", query).content.decode()
    assert "Re-ask was not sent: re-ask is off for this project" in body
    assert f'href="/projects/{run.project.slug}/settings#reask"' in body
    api = viewer_client.get(f"/api/v1/runs/{run.id}/replay", query).json()
    assert (
        api["reask"] == {"configured": False, "note": api["reask"]["note"]}
        and "settings" in api["reask"]["note"]
    )
    assert api["policies"][0]["reask"] is None
    assert fake.received == []


def test_not_asking_sends_nothing_even_when_configured(viewer_client, inspect, fake):
    run = inspect.incident
    configure(viewer_client, run.project, fake, "anthropic")
    response = viewer_client.get(f"/api/v1/runs/{run.id}/replay?policies=full")
    assert response.json()["reask"] is None and response.json()["policies"][0]["reask"] is None
    assert fake.received == []


def test_an_endpoint_error_is_shown_as_text_not_a_500(viewer_client, inspect, fake):
    run = inspect.incident
    configure(viewer_client, run.project, fake, "anthropic")
    fake.fail = True
    response = viewer_client.get(f"/runs/{run.id}/replay", {"policies": "full", "ask": "x?", "expect": "y"})
    assert response.status_code == 200
    assert 'unavailable</span> <span class="muted small">(the endpoint answered HTTP 500: overloaded)' in (
        response.content.decode()
    )
    fake.server_close()  # nothing listens: a refused connection is a sentence too
    response = viewer_client.get(
        f"/api/v1/runs/{run.id}/replay", {"policies": "full", "ask": "x?", "expect": "y"}
    )
    assert response.status_code == 200
    assert response.json()["policies"][0]["reask_reason"].startswith("the endpoint")


def test_a_reask_past_its_deadline_sends_nothing_more(inspect, db, fake):
    endpoint = ReaskEndpoint(
        project=inspect.incident.project,
        provider="anthropic",
        base_url=f"http://127.0.0.1:{fake.server_port}",
        model="m",
        sealed_key=sealing.seal(KEY),
    )
    question = question_from(["a?"], "b")
    result = reask_window(endpoint, [], question, deadline=time.monotonic() - 1)
    assert result["reask"] is None and result["reason"].startswith("out of time")
    assert fake.received == []


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"ask": "a?", "expect": "(?=x)"}, "expect: invalid perl operator"),
        ({"ask": "a|b|c|d|e|f", "expect": "x"}, "at most 5"),
        ({"ask": "a" * 501, "expect": "x"}, "longer than 500"),
        ({"ask": "a?"}, "expect must give"),
    ],
)
def test_a_bad_question_is_a_400_that_says_why(viewer_client, inspect, fake, query, message):
    run = inspect.incident
    for url in (f"/runs/{run.id}/replay", f"/api/v1/runs/{run.id}/replay"):
        response = viewer_client.get(url, {"policies": "full", **query})
        assert response.status_code == 400 and message in response.content.decode(), (url, query)
    assert fake.received == []


def test_setting_the_endpoint_is_checked_and_a_blank_key_keeps_the_old_one(inspect, db):
    project, user = inspect.incident.project, inspect.viewer
    given = {"provider": "anthropic", "base_url": "https://api.anthropic.com", "model": "m"}
    with pytest.raises(Refused, match="key must be given the first time"):
        writes.set_reask_endpoint(project, user, **given)
    for change, message in (
        ({"provider": "gemini"}, "provider must be one of anthropic, openai"),
        ({"base_url": "file:///etc/passwd"}, "base_url: the URL must be an http"),
        ({"model": " "}, "model must be a non-empty string"),
        ({"key": "a b"}, "key must not contain spaces"),
    ):
        with pytest.raises(Refused, match=message):
            writes.set_reask_endpoint(project, user, **{**given, "key": KEY, **change})
    writes.set_reask_endpoint(project, user, **given, key=KEY)
    writes.set_reask_endpoint(project, user, **{**given, "model": "other"})
    endpoint = ReaskEndpoint.objects.get(project=project)
    assert (sealing.unseal(endpoint.sealed_key), endpoint.model, endpoint.to_dict()["key"]) == (
        KEY,
        "other",
        "…cdef",
    )
    assert KEY not in endpoint.sealed_key
    writes.remove_reask_endpoint(project)
    assert not ReaskEndpoint.objects.filter(project=project).exists()


def test_only_an_admin_sets_the_endpoint(client, inspect, db):
    editor = factories.user("reask-editor")
    Membership.objects.create(project=inspect.incident.project, user=editor, role=Membership.Role.EDITOR)
    client.force_login(editor)
    response = client.post(
        f"/projects/{inspect.incident.project.slug}/settings/reask",
        {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "key": KEY},
    )
    assert response.status_code == 403
    assert not ReaskEndpoint.objects.exists()


def test_a_viewer_or_an_ingest_key_reads_the_replay_but_sends_nothing(client, viewer_client, inspect, fake):
    run = inspect.incident
    configure(viewer_client, run.project, fake, "anthropic")
    reader = factories.user("reask-reader")
    Membership.objects.create(project=run.project, user=reader, role=Membership.Role.VIEWER)
    client.force_login(reader)
    query = {"policies": "full", "ask": ASKS[0], "expect": "pay-shard-7"}
    page = client.get(f"/runs/{run.id}/replay", query)
    assert page.status_code == 200 and "asking needs the editor role" in page.content.decode()
    api = client.get(f"/api/v1/runs/{run.id}/replay", query).json()
    assert api["reask"] == {"configured": False, "note": api["reask"]["note"]}
    assert "editor role" in api["reask"]["note"] and api["policies"][0]["reask"] is None
    client.logout()
    by_key = client.get(f"/api/v1/runs/{run.id}/replay", query, HTTP_AUTHORIZATION=f"Bearer {inspect.key}")
    assert by_key.status_code == 200 and by_key.json()["reask"]["configured"] is False
    assert fake.received == []
