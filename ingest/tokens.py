"""Offline token estimates. No Django here.

OpenAI's cl100k_base (the GPT-4 tokenizer), counted by toktok: the encoding is compiled into the
package (nothing may download here), and its counts are tiktoken's (tests/ingest/test_tokens.py checks
them against tiktoken), in a ninth of the CPU when a batch's texts are counted together. Newer OpenAI
models and other providers tokenize differently, so per-item figures are marked as estimates and
reconciled to the billed prompt total where one is known (the call's estimate/billed ratio shows how far
off it was).

toktok keeps a cache per thread that counts: ~4-8 MiB once the process's main thread has warmed it
before forking (the Celery worker and gunicorn's master do), ~18 MiB in any other thread. So only the
main thread counts, and a process's other threads (the web's, when tasks run in it) hand their texts to
one counting thread of that process, instead of each building its own cache (issue 19).
"""

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import toktok

ENCODING = "cl100k_base"
# Framing tokens a chat API adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 4


def count(text: str) -> int:
    """Tokens in ``text`` (special-token markers in it are counted as plain text)."""
    return count_all([text])[0] if text else 0


def count_all(texts: Sequence[str]) -> list[int]:
    """Tokens in each text, in order: one call for many texts costs far less than one call each."""
    if threading.current_thread() is threading.main_thread():
        return _count_here(texts)
    return _counting_thread().submit(_count_here, texts).result()


def _count_here(texts: Sequence[str]) -> list[int]:
    # One thread: a worker process counts on its own core, beside the others.
    try:
        return toktok.batch_count(texts, ENCODING, threads=1)
    except UnicodeEncodeError:  # a lone surrogate (from a JSON escape): counted as U+FFFD, as tiktoken does
        return toktok.batch_count([_replace_surrogates(text) for text in texts], ENCODING, threads=1)


def _replace_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def _counting_thread() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokens")
        return _executor


def _forget_executor() -> None:
    """A forked child has no counting thread, whatever its parent had: it makes its own."""
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_executor)
