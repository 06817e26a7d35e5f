"""The proxy records in a process of its own: what the forwarding process hands it through the pipe is
recorded and spooled, also on shutdown and after the recording process died; a recording process that
falls behind makes the proxy drop calls, never wait."""

import asyncio
import io
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from ctxview.proxy.exchange import Exchange
from ctxview.proxy.recording import Pending, RecordingProcess, frame, frames
from tests.instrumented.fake_providers import ANTHROPIC_MESSAGES, anthropic_reply, anthropic_usage
from tests.proxy.conftest import PROVIDER_KEY

ROOT = Path(__file__).resolve().parents[2]
MESSAGES_BODY = {"model": "claude-fake-1", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads child processes in /proc")


def exchange(number: int, size: int = 10) -> Exchange:
    return Exchange(
        route="anthropic",
        method="POST",
        path="/v1/messages",
        request_headers={"user-agent": "test/1"},
        request_body=b"x" * size,
        status=200,
        response_headers={},
        response_body=b"{}",
        start_ns=number,
        end_ns=number + 1,
    )


def test_exchanges_are_read_back_as_they_were_written():
    first, second, third = exchange(1), exchange(2, size=100_000), exchange(3)
    pipe = io.BytesIO(frame(first) + frame(second) + frame(third)[:-5])  # the last one cut short
    assert [pickle.loads(data) for data in frames(pipe)] == [first, second]


def test_pending_exchanges_wait_on_disk_and_outlive_the_process(tmp_path):
    pending = Pending(tmp_path / "pending", max_bytes=250)
    for number in range(4):
        pending.put(bytes([number]) * 100)
    assert (len(pending), pending.dropped) == (2, 2)  # the third would pass max_bytes
    name, data = next(iter(pending))
    assert data == b"\x00" * 100
    pending.remove(name)

    # A new process finds the exchange the last one had not recorded, then the next put.
    again = Pending(tmp_path / "pending", max_bytes=250)
    again.put(b"new")
    again.close()
    assert [data for _name, data in again] == [b"\x01" * 100, b"new"]


def test_a_recording_process_that_falls_behind_drops_calls_without_waiting(tmp_path):
    async def scenario() -> RecordingProcess:
        recording = RecordingProcess("http://127.0.0.1:9", "cvk_test", tmp_path, buffer_limit=300_000)
        recording.command = [sys.executable, "-c", "import time; time.sleep(60)"]  # never reads
        await recording.start()
        started = time.monotonic()
        for number in range(20):
            recording.submit(exchange(number, size=100_000))
        assert time.monotonic() - started < 1.0
        await recording.close(timeout_s=0.5)
        return recording

    recording = asyncio.run(scenario())
    assert recording.handed >= 2  # the pipe and the buffer took some
    assert recording.dropped >= 10
    assert recording.handed + recording.dropped == 20


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def recording_child(pid: int, other_than: int | None = None, timeout_s: float = 15) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for child in children(pid):
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"ctxview.proxy.recording" in command and child != other_than:
                return child
        time.sleep(0.05)
    raise AssertionError("no recording process")


def proxy_command(fake, directory: Path, port: int = 0) -> list[str]:
    """``python -m ctxview.proxy`` with a receiver that is down: what it records stays in the spool."""
    return [
        sys.executable,
        "-m",
        "ctxview.proxy",
        "--listen",
        f"127.0.0.1:{port or free_port()}",
        "--send-to",
        f"http://127.0.0.1:{free_port()}",
        "--key",
        "cvk_test",
        "--upstream",
        f"anthropic={fake.url}",
        "--spool",
        str(directory),
    ]


def start_proxy_process(fake, directory: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        proxy_command(fake, directory, port),
        cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError("the proxy did not start") from None
            time.sleep(0.05)


@pytest.fixture
def proxy_process(fake, tmp_path):
    process, url = start_proxy_process(fake, tmp_path / "spool")
    yield process, url, tmp_path / "spool"
    if process.poll() is None:
        process.kill()
        process.wait(10)


def call(url: str, fake, number: int) -> bytes:
    reply = anthropic_reply(id=f"msg_{number}", model="claude-fake-1", text="ok", usage=anthropic_usage(3, 2))
    fake.enqueue(reply)
    headers = {"x-api-key": PROVIDER_KEY}
    response = httpx.post(
        url + "/anthropic" + ANTHROPIC_MESSAGES, json=MESSAGES_BODY | {"stream": True}, headers=headers
    )
    assert response.status_code == 200
    return response.content


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, process.stderr.read().decode() if process.stderr else ""


def spooled(directory: Path) -> list[dict]:
    return [json.loads(path.read_bytes()) for path in sorted(directory.glob("*.span.json"))]


def test_what_a_recording_process_left_unrecorded_the_next_one_records(fake, tmp_path):
    reply = anthropic_reply(id="msg_left", model="claude-fake-1", text="ok", usage=anthropic_usage(3, 2))
    left = replace(
        exchange(time.time_ns()),
        request_body=json.dumps(MESSAGES_BODY).encode(),
        response_headers={"content-type": "application/json"},
        response_body=json.dumps(reply.body).encode(),
    )
    Pending(tmp_path / "spool" / "pending").put(pickle.dumps(left))
    process, _url = start_proxy_process(fake, tmp_path / "spool")
    stop(process)

    assert [span["attributes"]["gen_ai.response.id"] for span in spooled(tmp_path / "spool")] == ["msg_left"]
    assert list((tmp_path / "spool" / "pending").iterdir()) == []


def test_calls_are_recorded_in_a_process_of_their_own_and_spooled_on_shutdown(proxy_process, fake):
    process, url, directory = proxy_process
    recorder = recording_child(process.pid)
    call(url, fake, 1)
    stop(process)

    assert not Path(f"/proc/{recorder}").exists()  # it ended with the proxy
    (span,) = spooled(directory)
    assert span["attributes"]["gen_ai.response.id"] == "msg_1"
    assert span["attributes"]["gen_ai.usage.output_tokens"] == 2
    assert span["attributes"]["gen_ai.request.stream"] is True
    assert span["attributes"]["ctxview.proxy.key_hash"]
    for path in directory.rglob("*"):
        assert path.is_dir() or PROVIDER_KEY.encode() not in path.read_bytes()


def test_a_recording_process_that_died_is_started_again(proxy_process, fake):
    process, url, directory = proxy_process
    first = recording_child(process.pid)
    os.kill(first, signal.SIGKILL)
    recording_child(process.pid, other_than=first)
    call(url, fake, 2)
    stop(process)

    assert [span["attributes"]["gen_ai.response.id"] for span in spooled(directory)] == ["msg_2"]
