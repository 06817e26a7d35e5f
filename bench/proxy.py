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

Two modes (``--mode burst,steady``, both by default). **burst**: each round starts all its streams at the
same instant and the fake sends every event at once. **steady**: a fixed number of streams stays in
flight (1, then 200), as agents' calls do: each fake answer lasts ``--stream-s`` seconds (its events
evenly spaced), the streams start staggered over that time, and each one that ends is followed by a new
one. Rounds of ``--round-s`` seconds alternate between direct and proxied; a call counts only if it
started once every stream of the other kind had ended (so 200 of its own kind were in flight). Printed
for each: the added first and last byte p50/p99, the forwarding process's CPU per proxied call, and
the proxy's RSS.
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
    chunks = _sse(body.get("events", EVENTS))
    spacing = body.get("stream_s", 0) / len(chunks)
    loop = asyncio.get_running_loop()
    begin = loop.time()
    for number, chunk in enumerate(chunks):
        # The first event at once, as a provider sends message_start; each next one at its own time from
        # the start (sleeps overshoot by up to a millisecond: added up, they would blur the last byte).
        if spacing and number:
            await asyncio.sleep(max(begin + number * spacing - loop.time(), 0))
        await response.write(chunk)
    await response.write_eof()
    return response


RECEIVED = [0]  # spans the sink was sent


async def _sink(request: web.Request) -> web.Response:
    batch = ExportTraceServiceRequest.FromString(await request.read())
    RECEIVED[0] += sum(len(scope.spans) for spans in batch.resource_spans for scope in spans.scope_spans)
    return web.Response(body=b"", content_type="application/x-protobuf")


async def _one(
    session: aiohttp.ClientSession, url: str, events: int, stream_s: float = 0.0
) -> tuple[float, float]:
    body = {"model": "claude-bench", "max_tokens": 16, "stream": True, "events": events,
            "stream_s": stream_s, "messages": [{"role": "user", "content": "hi"}]}  # fmt: skip
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


async def _steady(
    direct: str, through: str, in_flight: int, rounds: int, round_s: float, stream_s: float
) -> tuple[list[float], list[float], list[float], list[float], int]:
    """First and last byte times, direct then proxied, with ``in_flight`` streams kept in flight; and how
    many proxied calls were made in all (for the CPU per call).

    ``rounds`` pairs of rounds, direct then proxied; a stream that ends is followed by one of the current
    round's kind. A call counts if it started in its round once every stream of the previous round ended.
    """
    kinds = [direct, through] * rounds
    started = time.perf_counter()
    ends_at = started + len(kinds) * round_s
    calls: list[tuple[str, float, float, float]] = []  # (url, start, first byte, last byte)

    def current() -> str:
        return kinds[min(int((time.perf_counter() - started) / round_s), len(kinds) - 1)]

    async def worker(session: aiohttp.ClientSession, delay: float) -> None:
        await asyncio.sleep(delay)  # staggered starts: the streams' ends are spread too
        while time.perf_counter() < ends_at:
            url = current()
            start = time.perf_counter()
            first, last = await _one(session, url, EVENTS, stream_s)
            calls.append((url, start, start + first, start + last))

    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session, stream_s * n / in_flight) for n in range(in_flight)))
    times: dict[str, tuple[list[float], list[float]]] = {direct: ([], []), through: ([], [])}
    for number, url in enumerate(kinds):
        round_start, round_end = started + number * round_s, started + (number + 1) * round_s
        earlier = [last for _url, start, _first, last in calls if start < round_start]
        settled = max(earlier, default=round_start)
        for call_url, start, first, last in calls:
            if call_url == url and max(round_start, settled) <= start < round_end:
                times[url][0].append(first - start)
                times[url][1].append(last - start)
    proxied = sum(1 for url, *_times in calls if url == through)
    return (*times[direct], *times[through], proxied)


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


HEADER = (
    "concurrency  requests  direct first byte p50 (ms)  added first byte p50/p99 (ms)"
    "  added last byte p50/p99 (ms)  RSS (MB)     forwarding CPU/call (ms)"
)


def _row(
    concurrency: int,
    d_first: list[float],
    d_last: list[float],
    p_first: list[float],
    p_last: list[float],
    forwarding_cpu_s: float,
    proxied: int,
    pid: int,
) -> str:
    added = [
        (_percentile(p, q) - _percentile(d, q)) * 1000
        for p, d in ((p_first, d_first), (p_last, d_last))
        for q in (50, 99)
    ]
    return (
        f"{concurrency:>11}  {len(p_first):>8}  {_percentile(d_first, 50) * 1000:>26.2f}"
        f"  {added[0]:>14.2f} / {added[1]:<12.2f}  {added[2]:>13.2f} / {added[3]:<12.2f}"
        f"  {_rss(pid):>11}  {forwarding_cpu_s * 1000 / max(proxied, 1):>12.3f}"
    )


async def _main(
    rounds: int,
    recording: bool,
    root: Path,
    longer: int = 10,
    modes: tuple[str, ...] = ("burst", "steady"),
    steady_rounds: int = 3,
    round_s: float = 12.0,
    stream_s: float = 3.0,
    in_flight: tuple[int, ...] = (1, 200),
) -> None:
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
        calls = 0
        _own, recording_start = _cpu_s(proxy.pid)
        if "burst" in modes:
            print("burst: each round's streams start together, the fake sends all events at once")
            print(HEADER)
            for concurrency, count in ((1, rounds * 20), (200, rounds)):
                forwarding_start, _children = _cpu_s(proxy.pid)
                measured = await _measure(direct, through, concurrency, count, EVENTS)
                proxied = len(measured[2]) + concurrency  # and the warm-up's
                print(
                    _row(concurrency, *measured, _cpu_s(proxy.pid)[0] - forwarding_start, proxied, proxy.pid)
                )
                calls += proxied
            await _measure(direct, through, 200, 2, EVENTS * longer)
            calls += 600
            print(
                f"after 400 streams {longer}x longer: proxy RSS {_rss(proxy.pid)} MB,"
                f" forwarding peak {_peak_mb(proxy.pid):.1f} MB; load average {_load()}"
            )
        if "steady" in modes:
            print(
                f"steady: streams of {stream_s:g} s kept in flight, staggered; {steady_rounds} pairs of"
                f" {round_s:g} s rounds, direct then proxied; load average {_load()}"
            )
            print(HEADER)
            for concurrency in in_flight:
                forwarding_start, _children = _cpu_s(proxy.pid)
                *measured, proxied = await _steady(
                    direct, through, concurrency, steady_rounds, round_s, stream_s
                )
                print(
                    _row(concurrency, *measured, _cpu_s(proxy.pid)[0] - forwarding_start, proxied, proxy.pid)
                )
                calls += proxied
            print(f"forwarding peak RSS {_peak_mb(proxy.pid):.1f} MB; load average {_load()}")
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
    """The CPU time of ``pid`` and of its children so far, in seconds: the sum of their threads' run time
    in /proc/<pid>/task/<tid>/schedstat (nanoseconds: /proc/<pid>/stat counts 10 ms ticks, too coarse for
    a few calls), else user + system time from /proc/<pid>/stat."""
    ticks = os.sysconf("SC_CLK_TCK")
    times = []
    for process in _process_tree(pid):
        try:
            threads = list(Path(f"/proc/{process}/task").glob("*/schedstat"))
            if threads:
                times.append(sum(_run_ns(thread) for thread in threads) / 1e9)
                continue
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        times.append((int(fields[11]) + int(fields[12])) / ticks)
    return (times[0], sum(times[1:])) if times else (float("nan"), float("nan"))


def _run_ns(schedstat: Path) -> int:
    try:
        return int(schedstat.read_text().split()[0])
    except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
        return 0


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--rounds", type=int, default=5, help="rounds of 200 streams (x20 single streams)")
    arguments.add_argument(
        "--longer", type=int, default=10, help="how many times longer the last streams are (default 10)"
    )
    arguments.add_argument("--recording", choices=("on", "off"), default="on")
    arguments.add_argument("--mode", default="burst,steady", help="burst, steady, or both (default)")
    arguments.add_argument("--steady-rounds", type=int, default=3, help="pairs of steady rounds (default 3)")
    arguments.add_argument("--round-s", type=float, default=12.0, help="a steady round's length (default 12)")
    arguments.add_argument("--stream-s", type=float, default=3.0, help="a steady stream's length (default 3)")
    arguments.add_argument(
        "--in-flight", default="1,200", help="steady: the numbers of streams kept in flight (default 1,200)"
    )
    arguments.add_argument("--proxy-root", type=Path, default=ROOT, help="the checkout the proxy runs from")
    arguments.add_argument(
        "--serve-forwarding", nargs=2, metavar=("HOST:PORT", "UPSTREAM"), help=argparse.SUPPRESS
    )
    options = arguments.parse_args()
    if options.serve_forwarding:
        _serve_forwarding(*options.serve_forwarding)
    else:
        modes = tuple(options.mode.split(","))
        if not set(modes) <= {"burst", "steady"}:
            arguments.error(f"--mode takes burst, steady or burst,steady, not {options.mode!r}")
        asyncio.run(
            _main(
                options.rounds,
                options.recording == "on",
                options.proxy_root.resolve(),
                options.longer,
                modes,
                options.steady_rounds,
                options.round_s,
                options.stream_s,
                tuple(int(number) for number in options.in_flight.split(",")),
            )
        )
