"""Provider usage -> OTel GenAI usage attributes: exact figures, and unknown figures stay absent."""

from types import SimpleNamespace

import pytest

from ctxview_sdk.usage import usage_attributes

INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"


def test_anthropic_input_adds_cache_read_and_creation_back():
    usage = {
        "input_tokens": 100,
        "cache_read_input_tokens": 2000,
        "cache_creation_input_tokens": 300,
        "output_tokens": 50,
    }
    assert usage_attributes(usage, "anthropic") == {
        INPUT: 2400,
        OUTPUT: 50,
        CACHE_READ: 2000,
        CACHE_CREATION: 300,
    }


def test_anthropic_sdk_object_with_null_cache_fields_leaves_them_absent():
    # The Anthropic SDK's Usage model has the cache fields, set to None when not reported.
    usage = SimpleNamespace(
        input_tokens=42, output_tokens=7, cache_read_input_tokens=None, cache_creation_input_tokens=None
    )
    assert usage_attributes(usage, "anthropic") == {INPUT: 42, OUTPUT: 7}


def test_anthropic_thinking_tokens_and_ttl_breakdown():
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 5},
        "output_tokens": 90,
        "output_tokens_details": {"thinking_tokens": 60},
    }
    assert usage_attributes(usage, "anthropic") == {
        INPUT: 35,
        OUTPUT: 90,
        CACHE_READ: 0,
        CACHE_CREATION: 25,
        REASONING: 60,
    }


def test_openai_chat_prompt_tokens_already_include_cached_tokens():
    usage = {
        "prompt_tokens": 2006,
        "completion_tokens": 300,
        "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }
    assert usage_attributes(usage, "openai") == {INPUT: 2006, OUTPUT: 300, CACHE_READ: 1920, REASONING: 256}


def test_openai_chat_without_details_reports_no_cache_figure():
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "prompt_tokens_details": None}
    assert usage_attributes(usage, "openai") == {INPUT: 12, OUTPUT: 3}


def test_openai_responses_shape_and_a_reported_zero_stays_zero():
    usage = {
        "input_tokens": 500,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 530,
    }
    assert usage_attributes(usage, "openai") == {INPUT: 500, OUTPUT: 30, CACHE_READ: 0, REASONING: 12}


def test_a_pydantic_style_object_is_read_through_model_dump():
    class Usage:
        def model_dump(self):
            return {"prompt_tokens": 9, "completion_tokens": 1}

    assert usage_attributes(Usage()) == {INPUT: 9, OUTPUT: 1}


def test_unknown_output_stays_absent_never_zero():
    assert usage_attributes({"input_tokens": 5}, "anthropic") == {INPUT: 5}


def test_input_is_unknown_when_only_cache_figures_are_given():
    assert usage_attributes({"cache_read_input_tokens": 5}, "anthropic") == {CACHE_READ: 5}


@pytest.mark.parametrize("usage", [None, "lots", 12, {"input_tokens": -3, "output_tokens": "x"}])
def test_junk_usage_is_ignored_not_raised(usage):
    assert usage_attributes(usage) == {}
