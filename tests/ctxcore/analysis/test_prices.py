"""The price table: tolerant model names, a source for every figure, and editable rows."""

import pytest

from ctxcore.analysis.limits import minimum_cacheable
from ctxcore.analysis.prices import FIELDS, PRICES, price_for, table_from_rows


@pytest.mark.parametrize(
    ("model", "expected_input"),
    [
        ("claude-sonnet-4-5-20250929", 3),
        ("anthropic/claude-sonnet-4.5", 3),
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", 15),
        ("claude-opus-4-5@20251101", 5),
        ("claude-haiku-4-5", 1),
        ("gpt-4o-2024-08-06", 2.5),
        ("gpt-4o-mini-2024-07-18", 0.15),
        ("gpt-4.1-mini", 0.4),
        ("o3-2025-04-16", 2),
        ("gpt-5-mini-2025-08-07", 0.25),
    ],
)
def test_model_names_match_tolerantly(model, expected_input):
    assert price_for(model).input == expected_input


@pytest.mark.parametrize("model", ["o3-pro", "claude-opus-4-9", "gemini-2.5-pro", ""])
def test_an_unknown_or_different_model_has_no_price(model):
    assert price_for(model) is None


def test_every_figure_says_where_it_comes_from():
    for model, price in PRICES.items():
        assert set(price.source) == set(FIELDS), model
        assert all(len(text) > 20 for text in price.source.values()), model


def test_anthropic_writes_cost_more_than_input_and_openai_writes_cost_input():
    sonnet, gpt = PRICES["claude-sonnet-4-5"], PRICES["gpt-4.1"]
    assert (sonnet.cache_write_5m, sonnet.cache_write_1h, sonnet.cache_read) == (3.75, 6, 0.30)
    assert (gpt.cache_write_5m, gpt.cache_write_1h, gpt.cache_read) == (2, 2, 0.5)


def test_a_user_edited_table_replaces_the_defaults():
    table = table_from_rows([{"model": "claude-sonnet-4-5", "input": 2, "output": 10, "cache_read": 0.2}])
    price = price_for("claude-sonnet-4-5-20250929", table)
    assert (price.input, price.cache_write_5m, price.cache_read) == (2.0, 2.0, 0.2)
    assert price_for("gpt-4o", table) is None


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-opus-4-5", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("gpt-4o", 1024),
        ("", 1024),
    ],
)
def test_minimum_cacheable_prefix_per_model(model, minimum):
    assert minimum_cacheable(model) == minimum


def test_a_stored_null_rate_is_a_rate_not_given():
    table = table_from_rows([{"model": "m1", "input": 10, "output": 50, "cache_read": None}])
    assert (table["m1"].cache_read, table["m1"].cache_write_5m) == (10.0, 10.0)
