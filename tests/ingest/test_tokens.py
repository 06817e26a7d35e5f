"""Token estimates: cl100k_base offline, special-token markers counted as plain text."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import tokens


def test_known_counts():
    assert tokens.count("") == 0
    assert tokens.count("hello world") == 2
    # A special-token marker in content is text, not a special token (and not an error).
    assert tokens.count("<|endoftext|>") > 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "é", " ", "\n", "<|endoftext|>", "<|fim_prefix|>", "1", "🙂", "x"])))
def test_same_count_as_encoding_with_special_tokens_disallowed_as_text(pieces):
    text = "".join(pieces)
    assert tokens.count(text) == len(tokens._encoding().encode(text, disallowed_special=()))
