"""The recording proxy's command line (``python -m ctxview.proxy``, ``ctxview proxy``). No Django here.

    python -m ctxview.proxy --listen 127.0.0.1:8788 --send-to http://127.0.0.1:8000 --key cvk_... \\
        [--upstream anthropic=URL] [--upstream openai=URL] [--upstream gemini=URL] [--spool DIR]

Clients then use http://127.0.0.1:8788/anthropic, http://127.0.0.1:8788/openai/v1 and
http://127.0.0.1:8788/gemini as their base URLs.

One proxy per spool folder: a second one started on the same folder exits (``spool.lock``), since two
would send the same spans twice.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from pathlib import Path
from urllib.parse import urlsplit

from aiohttp import web

from ctxview.proxy import runs, server, spool
from ctxview.proxy.recording import RecordingProcess

logger = logging.getLogger("ctxview.proxy")

DEFAULT_LISTEN = "127.0.0.1:8788"


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"--listen takes HOST:PORT, not {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _upstream(value: str) -> tuple[str, str]:
    name, _, url = value.partition("=")
    if name not in server.DEFAULT_UPSTREAMS or not url.startswith(("http://", "https://")):
        names = ", ".join(server.DEFAULT_UPSTREAMS)
        raise argparse.ArgumentTypeError(f"--upstream takes NAME=URL with NAME one of {names}, not {value!r}")
    return name, url


def _send_to(value: str) -> str:
    """The ctxview server's URL; one given with its OTLP path (``…/v1/traces``, as the SDK takes it) too."""
    url = urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname or url.query or url.fragment:
        raise argparse.ArgumentTypeError(
            f"--send-to takes the ctxview server's URL, http://HOST:PORT or https://HOST, not {value!r}"
        )
    return value.rstrip("/").removesuffix("/v1/traces")


def _key(value: str) -> str:
    key = value.strip()  # a key read from a file keeps its line break
    if any(character.isspace() for character in key):
        raise argparse.ArgumentTypeError("an ingest key has no spaces or line breaks inside it")
    return key


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxview proxy",
        description="Forward model calls to their provider unchanged, and record each one in ctxview.",
    )
    parser.add_argument(
        "--listen",
        type=_listen,
        default=_listen(DEFAULT_LISTEN),
        help=f"HOST:PORT (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--send-to", required=True, type=_send_to, help="the ctxview server, e.g. http://127.0.0.1:8000"
    )
    parser.add_argument(
        "--key",
        type=_key,
        default=os.environ.get("CTXVIEW_INGEST_KEY", ""),
        help="the project's ingest key (default: $CTXVIEW_INGEST_KEY)",
    )
    parser.add_argument(
        "--upstream",
        type=_upstream,
        action="append",
        default=[],
        metavar="NAME=URL",
        help="replace a provider's public URL (anthropic, openai, gemini); repeatable",
    )
    parser.add_argument(
        "--spool", type=Path, default=None, help=f"the on-disk queue (default {spool.default_directory()})"
    )
    parser.add_argument(
        "--spool-max-calls", type=int, default=spool.MAX_SPANS, help="oldest dropped beyond this many"
    )
    parser.add_argument(
        "--spool-max-mb", type=int, default=spool.MAX_BYTES // 2**20, help="or beyond this size"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    if not options.key:
        parser().error("--key (or $CTXVIEW_INGEST_KEY) is required: the project's ingest key")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ctxview-proxy %(levelname)s %(message)s")
    directory = options.spool or spool.default_directory()
    try:
        held = spool.lock(directory)
    except spool.InUse as exc:
        logger.error("%s", exc)
        return 1
    recording = RecordingProcess(
        options.send_to,
        options.key,
        directory,
        options.spool_max_calls,
        options.spool_max_mb * 2**20,
        keep_open=(held,),
    )
    proxy = server.Proxy(
        dict(options.upstream),
        recording.submit,
        runs.load_salt(directory),
        spill_to=recording.pending_directory,
    )
    host, port = options.listen
    serve(proxy, host, port, recording)
    return 0


def serve(proxy: server.Proxy, host: str, port: int, recording: RecordingProcess | None = None) -> None:
    """Serve ``proxy`` until SIGINT or SIGTERM, then let ``recording`` finish what it was handed."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(_serve(proxy, host, port, recording))


def _loop_factory():
    """uvloop's event loop where it is installed (not on Windows), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(proxy: server.Proxy, host: str, port: int, recording: RecordingProcess | None) -> None:
    runner = web.AppRunner(proxy.app(), access_log=None)
    # Before the port opens: a TERM sent as soon as it accepts stops the proxy cleanly, not by default.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        if recording is not None:
            await recording.start()
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        logger.info("listening on http://%s:%d (/anthropic, /openai/v1, /gemini)", host, port)
        await stop.wait()
    finally:
        await runner.cleanup()  # waits for the requests in flight: each hands its call over
        if recording is not None:
            await recording.close()
