"""Offline token estimates. No Django here.

OpenAI's cl100k_base (the GPT-4 tokenizer), counted by toktok: the encoding is compiled into the
package (nothing may download here), and its counts are tiktoken's (tests/ingest/test_tokens.py checks
them against tiktoken), in a ninth of the CPU when a batch's texts are counted together. Newer OpenAI
models and other providers tokenize differently, so per-item figures are marked as estimates and
reconciled to the billed prompt total where one is known (the call's estimate/billed ratio shows how far
off it was).
"""

from collections.abc import Sequence

import toktok

ENCODING = "cl100k_base"
# Framing tokens a chat API adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 4


def count(text: str) -> int:
    """Tokens in ``text`` (special-token markers in it are counted as plain text)."""
    return count_all([text])[0] if text else 0


def count_all(texts: Sequence[str]) -> list[int]:
    """Tokens in each text, in order: one call for many texts costs far less than one call each.

    One thread: a worker process counts on its own core, beside the others."""
    try:
        return toktok.batch_count(texts, ENCODING, threads=1)
    except UnicodeEncodeError:  # a lone surrogate (from a JSON escape): counted as U+FFFD, as tiktoken does
        return toktok.batch_count([_replace_surrogates(text) for text in texts], ENCODING, threads=1)


def _replace_surrogates(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
