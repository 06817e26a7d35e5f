"""The forwarding server (asyncio + aiohttp): ``/<route>/<path>`` -> the route's fixed upstream.

No Django here. What passes is not changed: the request's method, path, query, headers and body go to
the upstream as they came, minus the hop-by-hop headers (RFC 9110 §7.6.1) and ``X-Ctxview-*``; the
answer's status, headers and body come back as the upstream sent them (no decompression, no re-encoding),
chunk by chunk as they arrive, so a stream's first event reaches the client before the upstream is done.
Upstream errors pass as they are; only a failure to reach the upstream at all is the proxy's own
answer (502, or 504 on a timeout). Model calls are handed to the recorder once the answer is out.

An answer being recorded is kept in memory only up to ``SPILL_THRESHOLD``; past it, it is appended to a
file under ``spill_to`` as it arrives (issue 35: memory flat with stream length), and the recorder gets
the file's path (``Exchange.response_body_path``), which it removes once the call is recorded or dropped.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from ctxview.proxy import runs
from ctxview.proxy.exchange import BODY_SUFFIX, Exchange, is_recorded, remove_body_file

logger = logging.getLogger("ctxview.proxy")

DEFAULT_UPSTREAMS = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com",
    "gemini": "https://generativelanguage.googleapis.com",
}
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# Not forwarded: the client's Host (the upstream's own is sent), the length (recomputed from the same
# bytes), Expect (answered here by aiohttp).
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "expect"}
CTXVIEW_PREFIX = "x-ctxview-"
# The request headers recording reads (no credential among them).
KEPT = frozenset(
    {
        "user-agent",
        "content-encoding",
        "anthropic-version",
        "anthropic-beta",
        runs.RUN_HEADER,
        runs.AGENT_HEADER,
        *runs.SESSION_HEADERS,
        *runs.AGENT_ID_HEADERS,
    }
)
KEPT_RESPONSE = frozenset({"content-type", "content-encoding", "request-id", "x-request-id"})
CAPTURE_LIMIT = 64 * 1024 * 1024  # a larger answer is forwarded whole but not recorded
SPILL_THRESHOLD = 256 * 1024  # an answer past this waits in a file, not in memory
# Once spilled, the answer is appended in writes of about this size: plain blocking writes on the event
# loop, each short (they reach the page cache, not the disk).
SPILL_WRITE = 64 * 1024
MAX_REQUEST = 512 * 1024 * 1024
CONNECT_TIMEOUT_S = 30.0


def _without_connection_headers(headers) -> list[tuple[str, str]]:
    """The headers minus hop-by-hop ones, including those the Connection header names."""
    named = {
        token.strip().lower() for value in headers.getall("Connection", []) for token in value.split(",")
    }
    return [(name, value) for name, value in headers.items() if name.lower() not in named]


class Proxy:
    def __init__(
        self,
        upstreams: dict[str, str] | None = None,
        submit: Callable[[Exchange], None] | None = None,
        salt: bytes = b"",
        capture_limit: int = CAPTURE_LIMIT,
        spill_to: Path | None = None,
        spill_threshold: int = SPILL_THRESHOLD,
    ) -> None:
        self.upstreams = {
            name: url.rstrip("/") for name, url in (DEFAULT_UPSTREAMS | (upstreams or {})).items()
        }
        self.hosts = {name: URL(url).host or "" for name, url in self.upstreams.items()}
        self.submit = submit
        self.salt = salt
        self.capture_limit = capture_limit
        self.spill_to = spill_to  # None: answers are kept in memory up to capture_limit
        self.spill_threshold = spill_threshold
        self._spilled = itertools.count()
        self.session: aiohttp.ClientSession | None = None
        self.in_flight = 0  # requests being forwarded or not yet handed to the recorder

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST)
        app.router.add_route("*", "/{route:[^/]+}{tail:.*}", self.handle)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, app: web.Application) -> None:
        if self.spill_to is not None:
            self.spill_to.mkdir(parents=True, exist_ok=True)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            skip_auto_headers=("User-Agent", "Accept", "Accept-Encoding", "Content-Type"),
        )

    async def _close(self, app: web.Application) -> None:
        if self.session is not None:
            await self.session.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        try:
            return await self._handle(request)
        finally:
            self.in_flight -= 1

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        route = request.match_info["route"]
        base = self.upstreams.get(route)
        if base is None:
            return _error(404, f"no route /{route}: use /anthropic, /openai or /gemini")
        raw_tail = request.raw_path[len(route) + 1 :]
        path = raw_tail.split("?", 1)[0] or "/"
        start_ns = time.time_ns()
        body = await request.read()
        headers = [
            (name, value)
            for name, value in _without_connection_headers(request.headers)
            if name.lower() not in NOT_FORWARDED and not name.lower().startswith(CTXVIEW_PREFIX)
        ]
        recorded = self.submit is not None and is_recorded(route, request.method, path)
        exchange = None
        if recorded:
            lowered = {name.lower(): value for name, value in request.headers.items()}
            query = dict(parse_qsl(request.query_string))
            exchange = Exchange(
                route=route,
                method=request.method,
                path=path,
                request_headers={name: value for name, value in lowered.items() if name in KEPT},
                request_body=body,
                status=0,
                response_headers={},
                response_body=None,
                start_ns=start_ns,
                end_ns=start_ns,
                key_hash=runs.key_hash(self.salt, runs.provider_key(lowered, query)),
                server_address=self.hosts[route],
            )
        try:
            return await self._forward(request, URL(base + raw_tail, encoded=True), headers, body, exchange)
        finally:
            if exchange is not None:
                exchange.end_ns = time.time_ns()
                self.submit(exchange)  # after the answer went back (or failed)

    async def _forward(self, request, url, headers, body, exchange) -> web.StreamResponse:
        assert self.session is not None
        try:
            upstream = await self.session.request(
                request.method, url, headers=CIMultiDict(headers), data=body or None, allow_redirects=False
            )
        except TimeoutError:
            return self._failed(exchange, 504, "timeout", f"upstream {url.host} timed out")
        except aiohttp.ClientError as exc:
            return self._failed(exchange, 502, "upstream_unreachable", f"upstream {url.host}: {exc}")
        async with upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            # Content-Length stays, in its place: the same bytes follow, so aiohttp sends them unchunked.
            for name, value in _without_connection_headers(upstream.headers):
                if name.lower() not in HOP_BY_HOP:
                    response.headers.add(name, value)
            if exchange is not None:
                exchange.status = upstream.status
                exchange.response_headers = {
                    name.lower(): value
                    for name, value in upstream.headers.items()
                    if name.lower() in KEPT_RESPONSE
                }
            await response.prepare(request)
            capture = self._capture() if exchange is not None else None
            try:
                return await self._stream(request, url, upstream, response, exchange, capture)
            finally:
                if capture is not None:
                    capture.discard()  # a no-op once handed over; else (cancelled, an error) no file left

    async def _stream(self, request, url, upstream, response, exchange, capture) -> web.StreamResponse:
        try:
            async for chunk in upstream.content.iter_any():
                if exchange is not None and exchange.first_byte_ns is None:
                    exchange.first_byte_ns = time.time_ns()
                await response.write(chunk)
                if capture is not None:
                    capture.add(chunk)
        except (ConnectionResetError, aiohttp.ClientConnectionResetError):
            # The client went away: stop reading the upstream; record what was seen.
            if exchange is not None:
                exchange.error = "client_disconnected"
                capture.finish(exchange, partial=True)
            return response
        except (aiohttp.ClientError, TimeoutError) as exc:
            # The upstream broke off mid-answer: so does the proxy (no clean end of stream).
            logger.warning("upstream %s broke off: %s", url.host, exc)
            if exchange is not None:
                exchange.error = "upstream_broke_off"
                capture.finish(exchange, partial=True)
            if request.transport is not None:
                request.transport.close()
            return response
        await response.write_eof()
        if exchange is not None:
            capture.finish(exchange)
        return response

    def _capture(self) -> Capture:
        path = None
        if self.spill_to is not None:
            name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._spilled):08d}{BODY_SUFFIX}"
            path = self.spill_to / name
        return Capture(self.capture_limit, self.spill_threshold, path)

    def _failed(self, exchange, status: int, kind: str, message: str) -> web.Response:
        logger.warning("%s", message)
        if exchange is not None:
            exchange.status = status
            exchange.error = kind
        return _error(status, message)


class Capture:
    """The bytes of one answer as they pass: in memory up to ``threshold``, then appended to ``path``.

    One growing buffer, not a list of chunks: no object per event. Past ``limit`` nothing is kept (the
    call is recorded without its answer, as a note says).
    """

    def __init__(self, limit: int, threshold: int, path: Path | None) -> None:
        self.limit = limit
        self.threshold = threshold
        self.path = path  # None: no spilling, the whole answer stays in memory
        self.size = 0
        self.kept = True
        self._buffer = bytearray()
        self._file = None

    def add(self, chunk: bytes) -> None:
        if not self.kept:
            return
        self.size += len(chunk)
        if self.size > self.limit:
            self.discard()
            return
        self._buffer += chunk
        if self.path is not None and len(self._buffer) >= (SPILL_WRITE if self._file else self.threshold):
            self._write()

    def finish(self, exchange: Exchange, partial: bool = False) -> None:
        """Put what was kept on ``exchange``: its bytes, or the path of its file."""
        if not self.kept:
            if partial:  # as before: what was seen of a cut-short answer, unless it passed the limit
                exchange.response_body = b""
            return
        if self._file is None:
            exchange.response_body = bytes(self._buffer)
            self._buffer = bytearray()
            self.kept = False
            return
        self._write()
        if not self.kept:  # the last write failed
            return
        self._file.close()
        self._file = None
        exchange.response_body_path = str(self.path)
        self.kept = False  # handed over: the recorder removes the file

    def discard(self) -> None:
        """Keep nothing more (past the limit, not recorded, or a write failed); remove the file."""
        self.kept = False
        self._buffer = bytearray()
        if self._file is not None:
            self._file.close()
            self._file = None
            remove_body_file(str(self.path))

    def _write(self) -> None:
        assert self.path is not None
        try:
            if self._file is None:
                self._file = open(self.path, "wb", buffering=0)  # closed in finish or discard
            self._file.write(self._buffer)
        except OSError as exc:  # a full disk: the answer passes all the same, unrecorded
            logger.warning("could not keep an answer to record (%s): not recorded", exc)
            self.discard()
            return
        self._buffer = bytearray()


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"type": "ctxview_proxy_error", "message": message}}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")


class Running:
    """A proxy served from a thread of its own (tests, the benchmark): ``port`` once started."""

    def __init__(self, proxy: Proxy, host: str = "127.0.0.1", port: int = 0) -> None:
        self.proxy = proxy
        self.host = host
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="ctxview-proxy", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Running:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the proxy did not start")
        return self

    def settled(self, timeout_s: float = 10.0) -> bool:
        """Whether every request was answered and handed to the recorder within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.proxy.in_flight and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.proxy.in_flight == 0

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.proxy.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # port 0: the one the system chose
