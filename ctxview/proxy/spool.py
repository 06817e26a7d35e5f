"""A bounded on-disk queue of recorded spans, oldest first. No Django here.

One JSON file per span (written to a temporary name, then renamed, so a crash leaves no half file),
named by the time it was recorded, so a restarted proxy sends what the last one left, in order. When the
queue holds more than ``max_spans`` spans or ``max_bytes`` bytes, the oldest are dropped: a counter and
a log line, never a wait.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from pathlib import Path

logger = logging.getLogger("ctxview.proxy")

MAX_SPANS = 20_000
MAX_BYTES = 512 * 1024 * 1024
SUFFIX = ".span.json"
LOCK = "proxy.lock"


class InUse(Exception):
    """Another proxy holds the spool folder: two would send the same spans twice."""


def lock(directory: Path) -> int:
    """Take the spool folder for this proxy; the open lock file's descriptor (the lock lasts while any
    process holds it open: the recording process inherits it, so it outlives a forwarding process killed
    before its child has recorded what it was handed)."""
    directory.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise InUse(
            f"another ctxview proxy is using the spool folder {directory}: stop it, or give this one"
            " another --spool"
        ) from None
    return descriptor


def default_directory() -> Path:
    """Under the user's cache directory: $XDG_CACHE_HOME, else ~/.cache (~/Library/Caches on macOS)."""
    base = os.environ.get("XDG_CACHE_HOME")
    if base:
        root = Path(base)
    elif os.uname().sysname == "Darwin":
        root = Path.home() / "Library" / "Caches"
    else:
        root = Path.home() / ".cache"
    return root / "ctxview" / "proxy-spool"


class Spool:
    """Spans waiting for the receiver; safe to use from the recording and the sending thread."""

    def __init__(self, directory: Path, max_spans: int = MAX_SPANS, max_bytes: int = MAX_BYTES) -> None:
        self.directory = directory
        self.max_spans = max_spans
        self.max_bytes = max_bytes
        self.dropped = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, int] = OrderedDict()  # file name -> size, oldest first
        self._bytes = 0
        directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(directory.glob("*" + SUFFIX)):
            size = path.stat().st_size
            self._entries[path.name] = size
            self._bytes += size
        for path in directory.glob("*.tmp"):  # a write cut short by a crash
            path.unlink(missing_ok=True)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def put(self, span: dict) -> None:
        data = json.dumps(span, ensure_ascii=False, separators=(",", ":")).encode()
        name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}{SUFFIX}"
        temporary = self.directory / (name + ".tmp")
        temporary.write_bytes(data)
        os.replace(temporary, self.directory / name)
        dropped = []
        with self._lock:
            self._entries[name] = len(data)
            self._bytes += len(data)
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_spans or self._bytes > self.max_bytes
            ):
                oldest, size = self._entries.popitem(last=False)
                self._bytes -= size
                dropped.append(oldest)
            self.dropped += len(dropped)
            total = self.dropped
        for oldest in dropped:
            (self.directory / oldest).unlink(missing_ok=True)
        if dropped:
            logger.warning(
                "spool full (%d spans, %d MB): dropped the %d oldest recorded calls, %d dropped so far",
                self.max_spans,
                self.max_bytes // 2**20,
                len(dropped),
                total,
            )

    def oldest(self, count: int) -> list[tuple[str, dict]]:
        """Up to ``count`` of the oldest spans, with their names (for ``remove``)."""
        with self._lock:
            names = list(self._entries)[:count]
        found = []
        for name in names:
            try:
                found.append((name, json.loads((self.directory / name).read_bytes())))
            except FileNotFoundError:  # dropped meanwhile
                continue
            except ValueError:
                logger.warning("spool: %s is not a span, removed", name)
                self.remove([name])
        return found

    def remove(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                size = self._entries.pop(name, None)
                if size is not None:
                    self._bytes -= size
        for name in names:
            (self.directory / name).unlink(missing_ok=True)
