"""What the forwarding process knows of one call, and which calls it records. No Django here.

Kept apart from ``record`` (which reads the bodies) so that the forwarding process imports nothing that
parses or encodes: it only captures an ``Exchange`` and hands it to the recording process.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

logger = logging.getLogger("ctxview.proxy")

BODY_SUFFIX = ".body"  # the file of an answer spilled while it streams (Exchange.response_body_path)


@dataclass
class Exchange:
    """One forwarded request and its answer, as the proxy saw them (no credential in it)."""

    route: str  # anthropic | openai | gemini
    method: str
    path: str  # the upstream path, without the query string (which may hold a Gemini key)
    request_headers: dict[str, str]  # lower-case names; only those recording reads (see server.KEPT)
    request_body: bytes
    status: int
    response_headers: dict[str, str]
    response_body: bytes | None  # None: larger than the capture limit, not kept (or in the file below)
    start_ns: int
    end_ns: int
    first_byte_ns: int | None = None
    error: str = ""  # the proxy's own failure (upstream timeout, connection refused, client gone)
    key_hash: str = ""  # salted hash of the provider key (runs.key_hash), "" when none was sent
    server_address: str = ""
    # An answer past the proxy's spill threshold waits in this file, not in memory (response_body is then
    # None): the recording side reads it, and removes it once the exchange is recorded or dropped.
    response_body_path: str = ""


def discard_body(exchange: Exchange) -> None:
    """Remove the exchange's spilled answer, if any (it was recorded, or will not be)."""
    if exchange.response_body_path:
        remove_body_file(exchange.response_body_path)


def remove_body_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove %s: %s", path, exc)


def is_recorded(route: str, method: str, path: str) -> bool:
    """Whether a request is a model call the proxy records (count_tokens and the rest pass unrecorded)."""
    if method != "POST":
        return False
    if route == "anthropic":
        return path.rstrip("/").endswith("/v1/messages")
    if route == "openai":
        return path.rstrip("/").endswith(("/chat/completions", "/responses"))
    if route == "gemini":
        return path.endswith((":generateContent", ":streamGenerateContent"))
    return False
