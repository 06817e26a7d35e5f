"""The recording proxy's added latency and memory (issue 35): python bench/proxy.py [--rounds N].

A local fake upstream (aiohttp) streams an Anthropic-shaped SSE answer of EVENTS events; the same
requests go to it directly and through ``python -m ctxview.proxy`` (processes of their own, recording to
a local sink that answers 200, so recording and export run as in production). For 1 and 200 concurrent
streams it prints the added time to the first byte and to the last byte, p50 and p99 (proxied minus
direct, each percentile taken over its own requests; direct and proxied rounds alternate, so both see
the same load from the rest of the machine), the proxy's RSS (the forwarding process + its recording
process) and the forwarding process's CPU time per call; then the RSS after streams 10x longer (memory
should not grow with stream length: past 256 KB an answer is spilled to a file; ``--longer 100`` makes
the long streams about 650 KB, past that threshold), how
many calls reached the sink, and the recording process's CPU time per call.

``--recording off`` serves the same forwarding without recording (where the time goes);
``--proxy-root DIR`` runs the proxy from another checkout (before/after on the same machine).
"""

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
EVENTS = 50


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _sse(events: int) -> list[bytes]:
    start = {"type": "message_start", "message": {"id": "msg_b", "type": "message", "role": "assistant",
             "model": "claude-bench", "content": [], "stop_reason": None,
             "usage": {"input_tokens": 10, "output_tokens": 1}}}  # fmt: skip
    chunks = [f"event: message_start\ndata: {json.dumps(start)}\n\n"]
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    chunks.append(f"event: content_block_start\ndata: {json.dumps(block)}\n\n")
    for number in range(events):
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": f"w{number} " * 8},
        }
        chunks.append(f"event: content_block_delta\ndata: {json.dumps(delta)}\n\n")
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": events}}
    chunks.append(f"event: message_delta\ndata: {json.dumps(end)}\n\nevent: message_stop\ndata: {{}}\n\n")
    return [chunk.encode() for chunk in chunks]


async def _upstream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for chunk in _sse(body.get("events", EVENTS)):
        await response.write(chunk)
    await response.write_eof()
    return response


RECEIVED = [0]  # spans the sink was sent


async def _sink(request: web.Request) -> web.Response:
    batch = ExportTraceServiceRequest.FromString(await request.read())
    RECEIVED[0] += sum(len(scope.spans) for spans in batch.resource_spans for scope in spans.scope_spans)
    return web.Response(body=b"", content_type="application/x-protobuf")


async def _one(session: aiohttp.ClientSession, url: str, events: int) -> tuple[float, float]:
    body = {"model": "claude-bench", "max_tokens": 16, "stream": True, "events": events,
            "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
    start = time.perf_counter()
    first = None
    async with session.post(url, json=body, headers={"x-api-key": "sk-bench"}) as response:
        async for _chunk in response.content.iter_any():
            if first is None:
                first = time.perf_counter()
    return (first or time.perf_counter()) - start, time.perf_counter() - start


async def _measure(
    direct: str, through: str, concurrency: int, rounds: int, events: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """First and last byte times, direct then proxied; their rounds alternate, so both see the same load."""
    times: dict[str, tuple[list[float], list[float]]] = {direct: ([], []), through: ([], [])}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for url in (direct, through):  # warm up: connections open, code paths run once
            await asyncio.gather(*(_one(session, url, events) for _ in range(concurrency)))
        for _ in range(rounds):
            for url, (firsts, lasts) in times.items():
                results = await asyncio.gather(*(_one(session, url, events) for _ in range(concurrency)))
                firsts += [first for first, _last in results]
                lasts += [last for _first, last in results]
    return (*times[direct], *times[through])


def _percentile(values: list[float], share: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(share) - 1]
        if len(values) > 1
        else values[0]
    )


def _process_tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def _rss_mb(pid: int) -> tuple[float, float]:
    """The RSS of ``pid`` and of its children (the recording process), in MB."""
    sizes = []
    for process in _process_tree(pid):
        try:
            lines = Path(f"/proc/{process}/status").read_text().splitlines()
        except OSError:
            continue
        sizes += [int(line.split()[1]) / 1024 for line in lines if line.startswith("VmRSS:")]
    return (sizes[0], sum(sizes[1:])) if sizes else (float("nan"), float("nan"))


def _peak_mb(pid: int) -> float:
    """The forwarding process's peak RSS (VmHWM) so far, in MB: what streams in flight held at once."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss(pid: int) -> str:
    own, children = _rss_mb(pid)
    return f"{own:.1f} + {children:.1f}"


def _serve_forwarding(listen: str, upstream: str) -> None:
    """The proxy without recording (``--recording off``), served as its command line serves it."""
    from ctxview.proxy import cli, server

    host, _, port = listen.rpartition(":")
    proxy = server.Proxy({"anthropic": upstream})
    if hasattr(cli, "serve"):
        cli.serve(proxy, host, int(port))
    else:  # a checkout from before the recording process
        asyncio.run(cli._serve(proxy, host, int(port), "-", Path("."), 0))


async def _main(rounds: int, recording: bool, root: Path, longer: int = 10) -> None:
    upstream_port, sink_port, proxy_port = _free_port(), _free_port(), _free_port()
    app = web.Application()
    app.router.add_post("/v1/messages", _upstream)
    app.router.add_post("/v1/traces", _sink)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", upstream_port).start()
    await web.TCPSite(runner, "127.0.0.1", sink_port).start()
    spool = tempfile.mkdtemp(prefix="ctxview-proxy-bench-")
    command = [sys.executable, "-m", "ctxview.proxy", "--listen", f"127.0.0.1:{proxy_port}",
               "--send-to", f"http://127.0.0.1:{sink_port}", "--key", "cvk_bench",
               "--upstream", f"anthropic=http://127.0.0.1:{upstream_port}", "--spool", spool]  # fmt: skip
    if not recording:
        command = [sys.executable, str(Path(__file__).resolve()), "--serve-forwarding",
                   f"127.0.0.1:{proxy_port}", f"http://127.0.0.1:{upstream_port}"]  # fmt: skip
    proxy = subprocess.Popen(
        command, cwd=root, env=os.environ | {"PYTHONPATH": str(root)}, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", proxy_port), timeout=0.1).close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        direct = f"http://127.0.0.1:{upstream_port}/v1/messages"
        through = f"http://127.0.0.1:{proxy_port}/anthropic/v1/messages"
        await asyncio.sleep(1)  # the recording process starts beside the proxy
        print(f"proxy from {root}, recording {'on' if recording else 'off'}, load average {_load()}")
        print(
            f"stream of {EVENTS + 4} SSE events; proxy RSS at start {_rss(proxy.pid)} MB"
            " (forwarding + recording process)"
        )
        print(
            "concurrency  requests  direct first byte p50 (ms)  added first byte p50/p99 (ms)"
            "  added last byte p50/p99 (ms)  RSS (MB)     forwarding CPU/call (ms)"
        )
        calls = 0
        _own, recording_start = _cpu_s(proxy.pid)
        for concurrency, count in ((1, rounds * 20), (200, rounds)):
            forwarding_start, _children = _cpu_s(proxy.pid)
            d_first, d_last, p_first, p_last = await _measure(direct, through, concurrency, count, EVENTS)
            forwarding_cpu = _cpu_s(proxy.pid)[0] - forwarding_start
            calls += len(p_first) + concurrency
            added = [
                (_percentile(p, q) - _percentile(d, q)) * 1000
                for p, d in ((p_first, d_first), (p_last, d_last))
                for q in (50, 99)
            ]
            print(
                f"{concurrency:>11}  {len(p_first):>8}  {_percentile(d_first, 50) * 1000:>26.2f}"
                f"  {added[0]:>14.2f} / {added[1]:<12.2f}  {added[2]:>13.2f} / {added[3]:<12.2f}"
                f"  {_rss(proxy.pid):>11}  {forwarding_cpu * 1000 / (len(p_first) + concurrency):>12.3f}"
            )
        await _measure(direct, through, 200, 2, EVENTS * longer)
        calls += 600
        print(
            f"after 400 streams {longer}x longer: proxy RSS {_rss(proxy.pid)} MB,"
            f" forwarding peak {_peak_mb(proxy.pid):.1f} MB; load average {_load()}"
        )
        waited = time.monotonic()
        while recording and RECEIVED[0] < calls and time.monotonic() - waited < 30:
            await asyncio.sleep(0.1)
        left = len(list(Path(spool).glob("*.span.json")))
        recording_cpu = _cpu_s(proxy.pid)[1] - recording_start
        print(
            f"{time.monotonic() - waited:.1f} s after the last call: {RECEIVED[0]} of {calls} calls delivered"
            f" to the sink, {left} spans left in the spool"
        )
        print(f"recording process CPU/call {recording_cpu * 1000 / calls:.3f} ms (0: in the proxy process)")
    finally:
        proxy.terminate()
        await asyncio.to_thread(proxy.wait, 30)
        await runner.cleanup()
        shutil.rmtree(spool, ignore_errors=True)


def _cpu_s(pid: int) -> tuple[float, float]:
    """The CPU time (user + system) of ``pid`` and of its children so far, in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    times = []
    for process in _process_tree(pid):
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        times.append((int(fields[11]) + int(fields[12])) / ticks)
    return (times[0], sum(times[1:])) if times else (float("nan"), float("nan"))


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=5, help="rounds of 200 streams (x20 single streams)")
    arguments.add_argument(
        "--longer", type=int, default=10, help="how many times longer the last streams are (default 10)"
    )
    arguments.add_argument("--recording", choices=("on", "off"), default="on")
    arguments.add_argument("--proxy-root", type=Path, default=ROOT, help="the checkout the proxy runs from")
    arguments.add_argument(
        "--serve-forwarding", nargs=2, metavar=("HOST:PORT", "UPSTREAM"), help=argparse.SUPPRESS
    )
    options = arguments.parse_args()
    if options.serve_forwarding:
        _serve_forwarding(*options.serve_forwarding)
    else:
        asyncio.run(
            _main(options.rounds, options.recording == "on", options.proxy_root.resolve(), options.longer)
        )
