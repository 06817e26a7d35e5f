"""A local fake provider, and the recording proxy in front of it (in this process, on a thread)."""

import pytest

from ctxview.proxy.export import Recorder, Sender
from ctxview.proxy.server import Proxy, Running
from ctxview.proxy.spool import Spool
from tests.instrumented.fake_providers import FakeProvider

PROVIDER_KEY = "sk-ant-proxy-test-7f3c9e1d2b4a"  # the provider key the clients send: must reach no table


@pytest.fixture
def fake():
    with FakeProvider() as provider:
        yield provider
        assert provider.errors == []


def start_proxy(fake: FakeProvider, recorder: Recorder | None = None) -> Running:
    upstreams = {"anthropic": fake.url, "openai": fake.url, "gemini": fake.url}
    submit = recorder.submit if recorder is not None else None
    # Long answers spill beside the spool (the command line spills them into its Pending folder).
    spill_to = recorder.spool.directory.parent / "pending" if recorder is not None else None
    return Running(Proxy(upstreams, submit, salt=b"test-salt", spill_to=spill_to)).start()


@pytest.fixture
def spool(tmp_path):
    return Spool(tmp_path / "spool")


@pytest.fixture
def recorder(spool):
    """Recording without sending: the spans stay in the spool for the test to read."""
    recorder = Recorder(spool)
    recorder.start()
    yield recorder
    recorder.stop()


@pytest.fixture
def proxy(fake, recorder):
    running = start_proxy(fake, recorder)
    yield running
    running.stop()


def sending_recorder(spool: Spool, send_to: str, key: str) -> Recorder:
    """A recorder that sends to ``send_to`` (short pauses, so a test sees a receiver come back soon)."""
    sender = Sender(spool, send_to, key, timeout_s=3, pause_s=0.2, max_pause_s=0.5)
    recorder = Recorder(spool, sender)
    recorder.start()
    return recorder
