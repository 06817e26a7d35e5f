"""The recording proxy's added latency and memory (issue 35): python bench/proxy.py [--rounds N].

A local fake upstream (aiohttp) streams an Anthropic-shaped SSE answer of EVENTS events; the same
requests go to it directly and through ``python -m ctxview.proxy`` (a process of its own, recording to
a local sink that answers 200, so recording and export run as in production). For 1 and 200 concurrent
streams it prints the added time to the first byte and to the last byte, p50 and p99 (proxied minus
direct, each percentile taken over its own run), and the proxy's RSS; then the RSS after streams 10x
longer (memory should not grow with stream length beyond the recorded copy of one answer per stream).
"""

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

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


async def _sink(request: web.Request) -> web.Response:
    await request.read()
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


async def _measure(url: str, concurrency: int, rounds: int, events: int) -> tuple[list[float], list[float]]:
    firsts, lasts = [], []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(_one(session, url, events) for _ in range(concurrency)))  # warm up
        for _ in range(rounds):
            results = await asyncio.gather(*(_one(session, url, events) for _ in range(concurrency)))
            firsts += [first for first, _last in results]
            lasts += [last for _first, last in results]
    return firsts, lasts


def _percentile(values: list[float], share: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(share) - 1]
        if len(values) > 1
        else values[0]
    )


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _main(rounds: int) -> None:
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
    proxy = subprocess.Popen(
        command, cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)}, stderr=subprocess.DEVNULL
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
        print(f"stream of {EVENTS + 4} SSE events; proxy RSS at start {_rss_mb(proxy.pid):.1f} MB")
        print("concurrency  requests  added first byte p50/p99 (ms)  added last byte p50/p99 (ms)  RSS (MB)")
        for concurrency, count in ((1, rounds * 20), (200, rounds)):
            d_first, d_last = await _measure(direct, concurrency, count, EVENTS)
            p_first, p_last = await _measure(through, concurrency, count, EVENTS)
            added = [
                (_percentile(p, q) - _percentile(d, q)) * 1000
                for p, d in ((p_first, d_first), (p_last, d_last))
                for q in (50, 99)
            ]
            print(
                f"{concurrency:>11}  {len(p_first):>8}  {added[0]:>14.2f} / {added[1]:<12.2f}"
                f"  {added[2]:>13.2f} / {added[3]:<12.2f}  {_rss_mb(proxy.pid):>8.1f}"
            )
        await _measure(through, 200, 2, EVENTS * 10)
        print(f"after 400 streams 10x longer: proxy RSS {_rss_mb(proxy.pid):.1f} MB")
        await asyncio.sleep(2)
        left = len(list(Path(spool).glob("*.span.json")))
        print(f"spans left in the spool 2 s later: {left}")
    finally:
        proxy.terminate()
        await asyncio.to_thread(proxy.wait, 30)
        await runner.cleanup()


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=5, help="rounds of 200 streams (x20 single streams)")
    asyncio.run(_main(arguments.parse_args().rounds))
