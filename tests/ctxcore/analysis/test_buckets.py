"""Tokens per bucket, reconciled to the billed prompt total."""

from ctxcore.analysis.buckets import bucket_tokens
from ctxcore.vocabulary import Item
from tests.ctxcore.analysis.builders import item


def items(*entries):
    return [Item.from_dict(entry, position) for position, entry in enumerate(entries)]


WINDOW = items(
    item("tool:a", "tools", 300, tokens_estimated=False),
    item("system:0", "system", 100, tokens_estimated=False),
    item("m1", "conversation", 250, tokens_estimated=False),
    item("r1", "tool_results", 350, tokens_estimated=False),
)


def test_the_remainder_under_the_billed_total_is_scaffolding():
    result = bucket_tokens(WINDOW, 1100)

    assert result["parts"]["tools"] == 300
    assert result["parts"]["scaffolding"] == 100
    assert (result["total"], result["items_total"], result["reconciled"], result["scale"]) == (
        1100,
        1000,
        True,
        1.0,
    )
    assert result["estimated"] is False


def test_buckets_over_the_billed_total_scale_down_to_exact_integers():
    result = bucket_tokens(WINDOW, 999)

    parts = result["parts"]
    assert sum(value for value in parts.values() if value) == 999
    assert parts["scaffolding"] == 0
    assert (parts["tools"], parts["system"], parts["conversation"], parts["tool_results"]) == (
        300,
        100,
        250,
        349,
    )
    assert result["scale"] == 0.999


def test_an_unknown_prompt_total_gives_raw_unreconciled_sums():
    result = bucket_tokens(WINDOW, None)

    assert (result["total"], result["reconciled"], result["parts"]["scaffolding"]) == (1000, False, None)


def test_estimates_and_unknown_item_tokens_are_marked():
    result = bucket_tokens(items(item("m1", tokens=10), item("m2", tokens=None)), 50)

    assert result["estimated"] is True
    assert result["unknown_items"] == 1
    assert result["parts"]["scaffolding"] == 40


def test_an_empty_window_with_a_billed_total_is_all_scaffolding():
    assert bucket_tokens([], 42)["parts"]["scaffolding"] == 42
