"""Issue 35: the forwarding process's memory per stream does not grow with the answer's length. An answer
past the spill threshold waits in a file, not in memory; it is recorded exactly as it was sent, survives a
recording process that died, and leaves no file behind once recorded or dropped (or, killed unread,
once old)."""

import json
import logging
import os
import pickle
import time
from dataclasses import replace

import httpx
import pytest

from ctxview.proxy import recording, server
from ctxview.proxy.exchange import Exchange
from ctxview.proxy.export import Recorder
from ctxview.proxy.recording import PENDING, Pending
from ctxview.proxy.server import Capture, Proxy, Running
from tests.instrumented.fake_providers import (
    ANTHROPIC_MESSAGES,
    anthropic_reply,
    anthropic_sse,
    anthropic_usage,
)
from tests.proxy.conftest import PROVIDER_KEY
from tests.proxy.test_recording import MESSAGES_BODY, exchange, spooled, start_proxy_process, stop

LONG_TEXT = "".join(f"word{number} " for number in range(60_000))  # about 600 KB, past the threshold


def output_text(span: dict) -> str:
    (message,) = json.loads(span["attributes"]["gen_ai.output.messages"])
    return "".join(part["content"] for part in message["parts"] if part["type"] == "text")


@pytest.fixture
def spilling(fake, recorder, tmp_path):
    """A proxy that spills past 64 KB, and the paths it handed over."""
    handed: list[str] = []

    def submit(exchange: Exchange) -> None:
        handed.append(exchange.response_body_path)
        recorder.submit(exchange)

    upstreams = {"anthropic": fake.url}
    proxy = Proxy(upstreams, submit, spill_to=tmp_path / "bodies", spill_threshold=64 * 1024)
    running = Running(proxy).start()
    yield running, handed, tmp_path / "bodies"
    running.stop()


@pytest.mark.parametrize("stream", [True, False])
def test_a_long_answer_is_recorded_exactly_as_sent_and_leaves_no_file(fake, recorder, spilling, stream):
    running, handed, bodies = spilling
    reply = anthropic_reply(id="msg_long", model="claude-fake-1", text=LONG_TEXT, usage=anthropic_usage(3, 2))
    fake.enqueue(reply)
    response = httpx.post(
        running.url + "/anthropic" + ANTHROPIC_MESSAGES,
        json=MESSAGES_BODY | {"stream": stream},
        headers={"x-api-key": PROVIDER_KEY},
    )
    assert response.content == (anthropic_sse(reply.body) if stream else json.dumps(reply.body).encode())
    assert running.settled() and recorder.flush(10)

    (span,) = [span for _name, span in recorder.spool.oldest(10)]
    assert output_text(span) == LONG_TEXT
    assert span["attributes"]["gen_ai.response.id"] == "msg_long"
    (path,) = handed
    assert path.startswith(str(bodies))  # it was spilled, not held
    assert list(bodies.iterdir()) == []


def test_an_answer_past_the_capture_limit_is_not_recorded_and_leaves_no_file(fake, recorder, tmp_path):
    proxy = Proxy(
        {"anthropic": fake.url},
        recorder.submit,
        capture_limit=300 * 1024,
        spill_to=tmp_path / "bodies",
        spill_threshold=64 * 1024,
    )
    running = Running(proxy).start()
    try:
        reply = anthropic_reply(id="msg_big", model="m", text=LONG_TEXT, usage=anthropic_usage(3, 2))
        fake.enqueue(reply)
        response = httpx.post(
            running.url + "/anthropic" + ANTHROPIC_MESSAGES, json=MESSAGES_BODY | {"stream": True}
        )
        assert response.content == anthropic_sse(reply.body)  # forwarded whole all the same
        assert running.settled() and recorder.flush(10)
    finally:
        running.stop()
    (span,) = [span for _name, span in recorder.spool.oldest(10)]
    assert "capture limit" in span["attributes"]["ctxview.proxy.note"]
    assert list((tmp_path / "bodies").iterdir()) == []


def test_a_capture_holds_at_most_the_threshold_in_memory_whatever_the_length(tmp_path):
    capture = Capture(server.CAPTURE_LIMIT, 256 * 1024, tmp_path / "answer.body")
    chunk = bytes(range(256)) * 16  # 4 KB, as stream events arrive
    held = 0
    for _ in range(5_000):  # 20 MB
        capture.add(chunk)
        held = max(held, len(capture._buffer))
    assert held <= 256 * 1024 + len(chunk)
    spilled = replace(exchange(1), response_body=None)
    capture.finish(spilled)
    assert spilled.response_body is None
    with open(spilled.response_body_path, "rb") as file:
        assert file.read() == chunk * 5_000


def test_an_answer_already_recorded_is_not_recorded_twice(spool, tmp_path):
    """A recording process that died after removing the file, before forgetting the exchange."""
    gone = replace(exchange(1), response_body=None, response_body_path=str(tmp_path / "gone.body"))
    recorder = Recorder(spool)
    recorder.record(gone)
    assert len(spool) == 0


def test_a_spilled_exchange_outlives_a_recording_process_that_died(fake, tmp_path):
    """What a killed recording process left in Pending (the exchange and its file), the next one records."""
    reply = anthropic_reply(
        id="msg_spilled", model="claude-fake-1", text=LONG_TEXT, usage=anthropic_usage(3, 2)
    )
    pending = tmp_path / "spool" / PENDING
    pending.mkdir(parents=True)
    body = pending / f"{time.time_ns():020d}-1-00000000.body"
    body.write_bytes(anthropic_sse(reply.body))
    left = replace(
        exchange(time.time_ns()),
        request_body=json.dumps(MESSAGES_BODY | {"stream": True}).encode(),
        response_headers={"content-type": "text/event-stream"},
        response_body=None,
        response_body_path=str(body),
    )
    Pending(pending).put(pickle.dumps(left))

    process, _url = start_proxy_process(fake, tmp_path / "spool")
    stop(process)

    (span,) = spooled(tmp_path / "spool")
    assert span["attributes"]["gen_ai.response.id"] == "msg_spilled"
    assert output_text(span) == LONG_TEXT
    assert list(pending.iterdir()) == []


def test_spilled_answers_no_exchange_names_are_removed_once_old(tmp_path, caplog):
    """A recording process killed with exchanges unread in its pipe leaves their files; the next removes
    them once they are old, and keeps a fresh one (maybe still streaming) and one an exchange names."""
    pending = tmp_path / PENDING
    pending.mkdir()
    hour_ago = time.time() - recording.ORPHAN_AGE_S - 60
    orphan, fresh, named = (pending / f"{number:020d}-1-00000000.body" for number in (1, 2, 3))
    for body in (orphan, fresh, named):
        body.write_bytes(b"event: message_start\n\n")
    for body in (orphan, named):
        os.utime(body, (hour_ago, hour_ago))
    Pending(pending).put(
        pickle.dumps(replace(exchange(1), response_body=None, response_body_path=str(named)))
    )

    with caplog.at_level(logging.WARNING, logger="ctxview.proxy"):
        assert recording.remove_orphan_bodies(pending) == 1
    assert sorted(path.name for path in pending.glob("*.body")) == [fresh.name, named.name]
    assert [record.message for record in caplog.records if "spilled answers" in record.message] == [
        "removed 1 spilled answers no call refers to (older than 60 min; a recording process was stopped"
        " with calls unread)"
    ]
    assert recording.remove_orphan_bodies(pending) == 0
