"""The proxy exporting to a live ctxview: the read API shows the windows and usage the fake received and
returned, the run is named by X-Ctxview-Run, the provider key reaches no table, and calls made while the
receiver was down arrive, each once, when it is back."""

import socket
import threading

import anthropic
import openai
import pytest
from django.db import connection

from tests.instrumented.fake_providers import (
    anthropic_reply,
    anthropic_usage,
    openai_reply,
    openai_usage,
)
from tests.proxy.conftest import PROVIDER_KEY, sending_recorder, start_proxy
from tests.redirects import redirecting

SYSTEM = "You are the deploy assistant."
TOOLS = [{"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object"}}]


def api(client, key, path):
    response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.content
    return response.json()


def calls_of(client, key) -> dict[str, list[dict]]:
    """Run key -> its calls (with content), through the read API."""
    found = {}
    for run in api(client, key, "/api/v1/runs")["runs"]:
        calls = api(client, key, f"/api/v1/runs/{run['id']}/calls")["calls"]
        found[run["key"]] = [api(client, key, f"/api/v1/calls/{call['id']}?content=1") for call in calls]
    return found


@pytest.fixture
def through(live_server, key, fake, spool):
    recorder = sending_recorder(spool, live_server.url, key)
    running = start_proxy(fake, recorder)
    yield running, recorder
    running.stop()
    recorder.stop()


def test_windows_and_usage_in_ctxview_are_what_the_fake_received_and_returned(through, fake, client, key):
    proxy, recorder = through
    usage = anthropic_usage(12, 7, cache_creation_input_tokens=2048, cache_read_input_tokens=0)
    later = anthropic_usage(30, 5, cache_creation_input_tokens=0, cache_read_input_tokens=2048)
    fake.enqueue(
        anthropic_reply(
            id="msg_1", model="claude-fake-1", usage=usage, tool_uses=[("toolu_1", "read_file", {})]
        ),
        anthropic_reply(id="msg_2", model="claude-fake-1", usage=later, text="Tuesday 14:00 UTC."),
        openai_reply(
            id="chatcmpl-1", model="gpt-4.1", usage=openai_usage(900, 8, cached_tokens=768), text="Hi"
        ),
    )
    run = {"X-Ctxview-Run": "deploy-question", "X-Ctxview-Agent": "assistant"}
    claude = anthropic.Anthropic(
        base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0, default_headers=run
    )
    messages = [{"role": "user", "content": "When is the deploy window?"}]
    first = claude.messages.create(
        model="claude-fake-1", max_tokens=64, system=SYSTEM, tools=TOOLS, messages=messages
    )
    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Tue 14:00"}],
        },
    ]
    with claude.messages.stream(
        model="claude-fake-1", max_tokens=64, system=SYSTEM, tools=TOOLS, messages=messages
    ) as stream:
        stream.until_done()
    gpt = openai.OpenAI(
        base_url=proxy.url + "/openai/v1",
        api_key=PROVIDER_KEY,
        max_retries=0,
        default_headers={"X-Ctxview-Run": "openai-run"},
    )
    chunks = gpt.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "Hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    assert [chunk.usage.prompt_tokens for chunk in chunks if chunk.usage] == [900]
    assert proxy.settled() and recorder.flush(20)

    runs = calls_of(client, key)
    assert set(runs) == {"deploy-question", "openai-run"}
    one, two = runs["deploy-question"]
    assert (one["seq"], two["seq"]) == (1, 2)
    assert one["agent"] == two["agent"] == "assistant"
    assert one["usage"] == {
        "uncached": 12,
        "cache_write": 2048,
        "cache_read": 0,
        "output": 7,
        "reasoning": None,
        "prompt_total": 12 + 2048,
    }
    assert two["usage"] | {"reasoning": None} == {
        "uncached": 30,
        "cache_write": 0,
        "cache_read": 2048,
        "output": 5,
        "reasoning": None,
        "prompt_total": 30 + 2048,
    }
    assert one["usage_reported"]["anthropic.usage.cache_creation.ephemeral_5m_input_tokens"] == 2048
    # The window: what the fake received, in render order (tools, system, messages).
    received = fake.requests[1].body
    items = two["items"]
    assert [item["kind"] for item in items] == ["tool", "system", "message", "message", "tool_result"]
    assert items[0]["id"] == "tool:read_file"
    assert items[1]["content"] == received["system"] == SYSTEM
    assert "When is the deploy window?" in items[2]["content"]
    assert "Tue 14:00" in items[4]["content"]
    assert len(received["messages"]) == 3
    assert [tool["name"] for tool in one["tool_calls"]] == ["read_file"]
    assert one["finish_reasons"] == ["tool_call"] and two["finish_reasons"] == ["stop"]
    assert one["content_captured"] is True

    (chat,) = runs["openai-run"]
    assert chat["provider"] == "openai"
    assert chat["usage"]["prompt_total"] == 900 and chat["usage"]["cache_read"] == 768
    assert chat["usage"]["uncached"] == 900 - 768 and chat["usage"]["output"] == 8


def test_the_provider_key_appears_in_no_table(through, fake, client, key):
    proxy, recorder = through
    fake.enqueue(anthropic_reply(id="msg_1", model="claude-fake-1", usage=anthropic_usage(3, 2), text="ok"))
    claude = anthropic.Anthropic(base_url=proxy.url + "/anthropic", api_key=PROVIDER_KEY, max_retries=0)
    claude.messages.create(model="claude-fake-1", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    assert proxy.settled() and recorder.flush(20)
    assert len(calls_of(client, key)) == 1

    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for value in row:
                    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                    assert PROVIDER_KEY not in text, table


class Relay:
    """A TCP relay from a fixed local port to the live server: the receiver is down until it starts."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.listener: socket.socket | None = None

    def start(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        if self.listener is not None:
            self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                incoming, _ = self.listener.accept()
            except OSError:
                return
            outgoing = socket.create_connection(("127.0.0.1", self.target_port))
            for source, sink in ((incoming, outgoing), (outgoing, incoming)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def small_call(proxy, fake, run: str, number: int):
    """Call ``number`` of run ``run`` through the proxy with the anthropic SDK; the fake answers
    ``msg_<number>``."""
    fake.enqueue(anthropic_reply(id=f"msg_{number}", model="claude-fake-1", usage=anthropic_usage(3, 2)))
    claude = anthropic.Anthropic(
        base_url=proxy.url + "/anthropic",
        api_key=PROVIDER_KEY,
        max_retries=0,
        default_headers={"X-Ctxview-Run": run},
    )
    return claude.messages.create(
        model="claude-fake-1", max_tokens=8, messages=[{"role": "user", "content": f"call {number}"}]
    )


def test_calls_made_while_the_receiver_was_down_arrive_once_it_is_back(live_server, key, fake, spool, client):
    relay = Relay(int(live_server.url.rsplit(":", 1)[1]))
    recorder = sending_recorder(spool, f"http://127.0.0.1:{relay.port}", key)
    proxy = start_proxy(fake, recorder)
    try:
        for number in range(3):
            reply = small_call(proxy, fake, "while-down", number)
            assert reply.id == f"msg_{number}"  # the agent is served while the receiver is down
        assert proxy.settled() and not recorder.flush(1.5)
        assert len(spool) == 3
        assert calls_of(client, key) == {}

        relay.start()
        assert proxy.settled() and recorder.flush(30)
        runs = calls_of(client, key)
        assert list(runs) == ["while-down"]
        assert [call["seq"] for call in runs["while-down"]] == [1, 2, 3]
        assert len(spool) == 0
    finally:
        proxy.stop()
        recorder.stop()
        relay.stop()


def test_a_receiver_url_that_redirects_keeps_the_calls_until_the_right_url_is_given(
    live_server, key, fake, spool, client, caplog
):
    """The OTLP exporter follows no redirect and counts a 3xx as sent: the sender must not, or the calls
    would leave the spool and reach no receiver."""
    with redirecting(307, live_server.url) as url:
        recorder = sending_recorder(spool, url, key)
        proxy = start_proxy(fake, recorder)
        try:
            for number in range(2):
                small_call(proxy, fake, "redirected", number)
            assert proxy.settled() and not recorder.flush(1.5)
        finally:
            proxy.stop()
            recorder.stop()
    assert len(spool) == 2
    assert calls_of(client, key) == {}
    assert f"receiver HTTP 307 (a redirect to {live_server.url}/v1/traces: give --send-to" in caplog.text

    recorder = sending_recorder(spool, live_server.url, key)  # started again with the receiver's own URL
    try:
        assert recorder.flush(30)
    finally:
        recorder.stop()
    assert [call["seq"] for call in calls_of(client, key)["redirected"]] == [1, 2]
    assert len(spool) == 0
