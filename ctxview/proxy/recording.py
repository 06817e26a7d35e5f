"""The recording process: the proxy records and sends in a child process of its own. No Django here.

The forwarding process's event loop only captures the bytes that pass. Once an answer has gone back, it
hands the exchange to this child through a pipe (``RecordingProcess.submit``: a length-prefixed pickle,
written without waiting). The child (``python -m ctxview.proxy.recording``) turns each exchange into a
span and spools it (``export.Recorder``), and its sending thread delivers the spool (``export.Sender``).
JSON parsing, span building and OTLP encoding so never hold the forwarding process's GIL, which a thread
would: a busy thread keeps the event loop waiting up to the interpreter's switch interval (5 ms).

Nothing waits on the child. A thread of the child empties the pipe into ``Pending`` (one file per
exchange under the spool) at the forwarding process's priority, while recording runs below it
(``NICENESS``); so a recording that lags behind keeps its backlog on disk, not in the forwarding
process's memory, and what a child that died had not recorded the next one records. Should the child
not read at all, the exchanges wait in the loop's write buffer up to ``BUFFER_LIMIT`` bytes; beyond that
(or beyond the spool's size in ``Pending``) a call is not recorded: a counter and a log line, as when the
spool is full. An answer past the forwarding process's spill threshold crosses as the path of a file in
``Pending``'s folder (``Exchange.response_body_path``), which stays until its exchange is recorded or
dropped; the files of exchanges a killed child never read are removed at the next start and every ten
minutes, once an hour old (``remove_orphan_bodies``). The provider key never crosses the pipe (only its
salted hash, computed on the loop). The child ends when its pipe closes, after recording what it was
handed and trying to send the spool for a moment (the rest waits on disk for the next start); a child
that died is started again.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import pickle
import signal
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ctxview.proxy import spool
from ctxview.proxy.exchange import BODY_SUFFIX, Exchange, discard_body, remove_body_file

logger = logging.getLogger("ctxview.proxy")

KEY_ENV = "CTXVIEW_INGEST_KEY"  # the ingest key reaches the child here, not on its command line
HEADER = struct.Struct("!Q")  # the length of the pickle that follows
PENDING = "pending"  # under the spool: exchanges read from the pipe, not yet recorded
SUFFIX = ".exchange"
BUFFER_LIMIT = 64 * 2**20
DRAIN_S = 2.0
# Below the forwarding process's priority: when both want the CPU, forwarding goes first, and recording
# catches up when the CPU is free (its backlog waits in Pending).
NICENESS = 10
RESTART_PAUSE_S = 1.0
MAX_RESTART_PAUSE_S = 30.0
# A spilled answer no waiting exchange names is removed once untouched this long: a child killed with
# exchanges unread in its pipe leaves theirs. An answer still streaming is appended to (its mtime moves)
# and one handed over is read from the pipe within moments, so an hour leaves a wide margin.
ORPHAN_AGE_S = 3600.0
SWEEP_EVERY_S = 600.0


class RecordingProcess:
    """The forwarding side: starts the recording process and hands it each finished exchange.

    ``start`` and ``close`` run on the proxy's event loop, and ``submit`` is called from it.
    """

    def __init__(
        self,
        send_to: str,
        key: str,
        directory: Path,
        max_spans: int = spool.MAX_SPANS,
        max_bytes: int = spool.MAX_BYTES,
        buffer_limit: int = BUFFER_LIMIT,
        keep_open: tuple[int, ...] = (),
    ) -> None:
        self.keep_open = keep_open  # descriptors the child inherits (the spool's lock)
        self.pending_directory = directory / PENDING  # where the forwarding process spills long answers
        self.command = [
            sys.executable,
            "-m",
            "ctxview.proxy.recording",
            "--send-to",
            send_to,
            "--spool",
            str(directory),
            "--spool-max-calls",
            str(max_spans),
            "--spool-max-bytes",
            str(max_bytes),
        ]
        self.env = os.environ | {KEY_ENV: key}
        self.buffer_limit = buffer_limit
        self.handed = 0
        self.dropped = 0
        self._process: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task | None = None
        self._closing = False

    async def start(self) -> None:
        await self._spawn()
        self._watcher = asyncio.create_task(self._restart_when_gone())

    def submit(self, exchange: Exchange) -> None:
        """Hand a finished exchange over; never waits."""
        process = self._process
        writer = process.stdin if process is not None else None
        if writer is None or process.returncode is not None or writer.is_closing():
            self._drop(exchange, "the recording process is not running")
            return
        data = frame(exchange)
        if writer.transport.get_write_buffer_size() + len(data) > self.buffer_limit:
            self._drop(exchange, "recording is behind")
            return
        writer.write(data)
        self.handed += 1

    async def close(self, timeout_s: float = DRAIN_S + 15) -> None:
        """Flush the pipe and wait for the child to record and send what it can; the rest waits on disk."""
        self._closing = True
        if self._watcher is not None:
            self._watcher.cancel()
        process = self._process
        if process is None or process.returncode is not None:
            return
        deadline = time.monotonic() + timeout_s
        writer = process.stdin
        if writer is not None and not writer.is_closing():
            writer.transport.set_write_buffer_limits(high=0)  # drain() then waits for an empty buffer
            try:
                await asyncio.wait_for(writer.drain(), timeout_s)
            except (TimeoutError, ConnectionError):
                pass
            writer.close()  # the child reads to the end of the pipe, then stops
        try:
            await asyncio.wait_for(process.wait(), max(deadline - time.monotonic(), 0.1))
        except TimeoutError:
            logger.warning("the recording process took too long: stopped (the next start records the rest)")
            process.kill()
            await process.wait()

    async def _spawn(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, env=self.env, pass_fds=self.keep_open
        )

    async def _restart_when_gone(self) -> None:
        pause = RESTART_PAUSE_S
        while True:
            assert self._process is not None
            started = time.monotonic()
            code = await self._process.wait()
            if self._closing:
                return
            if time.monotonic() - started > 10 * MAX_RESTART_PAUSE_S:
                pause = RESTART_PAUSE_S  # it ran for a while: not a crash loop
            logger.error("the recording process exited (code %s): starting another in %.0f s", code, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_RESTART_PAUSE_S)
            await self._spawn()

    def _drop(self, exchange: Exchange, reason: str) -> None:
        discard_body(exchange)
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 100 == 0:  # a log line per drop would add to the overload
            logger.warning("%s: a call was not recorded (%d so far)", reason, self.dropped)


# --- The pipe, and the child -----------------------------------------------------------------------


def frame(exchange: Exchange) -> bytes:
    """An exchange as the pipe carries it: its length, then its pickle."""
    data = pickle.dumps(exchange, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def frames(stream: BinaryIO) -> Iterator[bytes]:
    """The pickled exchanges the forwarding process wrote to ``stream``, until it closes."""
    while True:
        header = stream.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        (size,) = HEADER.unpack(header)
        data = stream.read(size)
        if len(data) < size:
            logger.warning("the pipe closed in the middle of a call: that call was not recorded")
            return
        yield data


class Pending:
    """Exchanges read from the pipe and not yet recorded: one file each, oldest first.

    A thread of the child empties the pipe at the forwarding process's priority, so what recording has
    not caught up with waits here, on disk, not in the forwarding process's memory; and what a child that
    died had not recorded, the next one records. (A file removed seconds after it was written has
    usually never reached the disk.) Beyond ``max_bytes`` waiting, a call is not recorded: a counter and
    a log line.
    """

    def __init__(self, directory: Path, max_bytes: int = spool.MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.dropped = 0
        directory.mkdir(parents=True, exist_ok=True)
        for path in directory.glob("*.tmp"):  # a write cut short by a crash
            path.unlink(missing_ok=True)
        self._waiting = deque(
            (path.name, path.stat().st_size) for path in sorted(directory.glob("*" + SUFFIX))
        )
        self._bytes = sum(size for _name, size in self._waiting)
        self._condition = threading.Condition()
        self._closed = False
        self._sequence = itertools.count()

    def __len__(self) -> int:
        with self._condition:
            return len(self._waiting)

    def put(self, data: bytes) -> bool:
        """Whether the exchange was kept (if not, its spilled answer is the caller's to remove)."""
        with self._condition:
            if self._bytes + len(data) > self.max_bytes and self._waiting:
                self.dropped += 1
                logger.warning("recording is %d MB behind: a call was not recorded", self._bytes // 2**20)
                return False
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._sequence):08d}{SUFFIX}"
        temporary = self.directory / (name + ".tmp")
        try:
            temporary.write_bytes(data)
            os.replace(temporary, self.directory / name)
        except OSError as exc:  # a full disk; the pipe is read on all the same
            self.dropped += 1
            logger.warning("could not keep a call to record (%s): not recorded", exc)
            return False
        with self._condition:
            self._waiting.append((name, len(data)))
            self._bytes += len(data)
            self._condition.notify()
        return True

    def close(self) -> None:
        """No more puts: iterating ends once the waiting exchanges are taken."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        """(name, pickle) of each waiting exchange, oldest first; waits for more until closed."""
        while True:
            with self._condition:
                while not self._waiting and not self._closed:
                    self._condition.wait()
                if not self._waiting:
                    return
                name, size = self._waiting.popleft()
                self._bytes -= size
            try:
                data = (self.directory / name).read_bytes()
            except FileNotFoundError:
                continue
            yield name, data

    def remove(self, name: str) -> None:
        """Forget a recorded exchange (until then a crash leaves it for the next child)."""
        (self.directory / name).unlink(missing_ok=True)


def remove_orphan_bodies(directory: Path, max_age_s: float = ORPHAN_AGE_S, now: float | None = None) -> int:
    """Remove the spilled answers in ``directory`` that no waiting exchange names and that were last
    written over ``max_age_s`` ago; how many were removed (one log line if any)."""
    now = time.time() if now is None else now
    old = []
    for path in directory.glob("*" + BODY_SUFFIX):
        try:
            if now - path.stat().st_mtime > max_age_s:
                old.append(path)
        except FileNotFoundError:  # recorded and removed meanwhile
            continue
    if not old:  # the usual case: the waiting exchanges (a backlog may be large) are not read
        return 0
    named = set()
    for path in directory.glob("*" + SUFFIX):  # also the one being recorded: removed only after
        try:
            exchange = pickle.loads(path.read_bytes())
        except Exception:  # gone meanwhile, or left by another version: names no file of ours
            continue
        if isinstance(exchange, Exchange) and exchange.response_body_path:
            named.add(Path(exchange.response_body_path).name)
    orphans = [path for path in old if path.name not in named]
    for path in orphans:
        remove_body_file(str(path))
    if orphans:
        logger.warning(
            "removed %d spilled answers no call refers to (older than %.0f min; a recording process was"
            " stopped with calls unread)",
            len(orphans),
            max_age_s / 60,
        )
    return len(orphans)


def _sweep_orphan_bodies(directory: Path) -> None:
    while True:
        time.sleep(SWEEP_EVERY_S)
        try:
            remove_orphan_bodies(directory)
        except OSError as exc:
            logger.warning("could not look for spilled answers to remove: %s", exc)


def _read_pipe(stream: BinaryIO, pending: Pending) -> None:
    try:
        for data in frames(stream):
            if not pending.put(data):
                _discard(data)
    finally:
        pending.close()


def _discard(data: bytes) -> None:
    """Remove the spilled answer of an exchange that will not be recorded (no file left behind)."""
    try:
        exchange = pickle.loads(data)
    except Exception:  # not an exchange of this version: nothing of ours to remove
        return
    if isinstance(exchange, Exchange):
        discard_body(exchange)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ctxview.proxy.recording",
        description="The proxy's recording process: reads exchanges from stdin (the proxy starts it).",
    )
    parser.add_argument("--send-to", required=True)
    parser.add_argument("--spool", type=Path, required=True)
    parser.add_argument("--spool-max-calls", type=int, default=spool.MAX_SPANS)
    parser.add_argument("--spool-max-bytes", type=int, default=spool.MAX_BYTES)
    parser.add_argument("--drain-s", type=float, default=DRAIN_S)
    return parser


def main(argv: list[str] | None = None) -> int:
    # The child ends when its pipe closes, however the proxy stopped: a Ctrl-C or a TERM sent to the whole
    # process group must not cut short the recording of what the proxy already handed over.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    options = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ctxview-proxy %(levelname)s %(message)s")
    pending = Pending(options.spool / PENDING, options.spool_max_bytes)
    remove_orphan_bodies(pending.directory)
    # The pipe's reader starts before the niceness is lowered: on Linux a thread's niceness is its own
    # (threads started later inherit it), so emptying the pipe keeps the forwarding process's priority.
    threading.Thread(target=_read_pipe, args=(sys.stdin.buffer, pending), name="pipe", daemon=True).start()
    try:
        os.nice(NICENESS)
    except OSError:  # not allowed here: it runs at the proxy's priority
        pass
    threading.Thread(
        target=_sweep_orphan_bodies, args=(pending.directory,), name="sweep", daemon=True
    ).start()
    # Imported here, not at the top: the forwarding process imports this module for RecordingProcess and
    # must not load the parsing, the OpenTelemetry SDK and its HTTP client.
    from ctxview.proxy.export import Recorder, Sender

    queue = spool.Spool(options.spool, options.spool_max_calls, options.spool_max_bytes)
    sender = Sender(queue, options.send_to, os.environ.get(KEY_ENV, ""))
    recorder = Recorder(queue, sender)
    logger.info("recording to %s, spool %s (%d waiting)", options.send_to, options.spool, len(queue))
    sender.start()
    for name, data in pending:
        try:
            exchange = pickle.loads(data)
        except Exception:  # left by another version of the proxy
            logger.warning("could not read %s: not recorded", name)
        else:
            recorder.record(exchange)
        pending.remove(name)
    sender.stop(options.drain_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
