"""Usage normalisation: exact figures per family, unknown stays None."""

import json

import pytest

from ingest.usage import normalise_usage, provider_name


def test_otel_inclusive_input_is_split_into_uncached_write_and_read():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 18_491,
            "gen_ai.usage.cache_read.input_tokens": 16_399,
            "gen_ai.usage.cache_creation.input_tokens": 2_089,
            "gen_ai.usage.output_tokens": 512,
        },
        provider="anthropic",
    )
    assert usage.to_dict() == {
        "uncached": 3,
        "cache_write": 2_089,
        "cache_read": 16_399,
        "output": 512,
        "reasoning": None,
        "prompt_total": 18_491,
    }
    assert usage.notes == ()


def test_the_genai_repository_rename_cache_write_is_read():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.cache_write.input_tokens": 60,
            "gen_ai.usage.cache_read.input_tokens": 30,
        }
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read, usage.prompt_total) == (10, 60, 30, 100)


def test_sentrys_cache_write_and_cached_read_spellings_are_read():
    # Sentry's AI monitoring names the write gen_ai.usage.input_tokens.cache_write (and the read
    # gen_ai.usage.input_tokens.cached); its input includes both.
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.input_tokens.cache_write": 60,
            "gen_ai.usage.input_tokens.cached": 30,
            "gen_ai.usage.output_tokens": 5,
        },
        provider="anthropic",
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read, usage.prompt_total) == (10, 60, 30, 100)


def test_only_a_prompt_total_leaves_the_split_unknown():
    usage = normalise_usage(
        {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40}, "anthropic"
    )
    assert usage.to_dict() == {
        "uncached": None,
        "cache_write": None,
        "cache_read": None,
        "output": 40,
        "reasoning": None,
        "prompt_total": 1200,
    }


def test_nothing_reported_is_all_unknown():
    assert set(normalise_usage({}).to_dict().values()) == {None}


def test_openai_cached_tokens_imply_no_cache_write():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 2006,
            "gen_ai.usage.cache_read.input_tokens": 1920,
            "gen_ai.usage.output_tokens": 300,
            "gen_ai.usage.reasoning.output_tokens": 256,
        },
        provider="openai",
    )
    assert usage.to_dict() == {
        "uncached": 86,
        "cache_write": 0,
        "cache_read": 1920,
        "output": 300,
        "reasoning": 256,
        "prompt_total": 2006,
    }
    assert usage.notes == ("cache_write taken as 0: openai reports no cache writes",)


def test_openinference_token_counts():
    usage = normalise_usage(
        {
            "llm.token_count.prompt": 5000,
            "llm.token_count.prompt_details.cache_read": 4000,
            "llm.token_count.prompt_details.cache_write": 500,
            "llm.token_count.completion": 77,
            "llm.token_count.completion_details.reasoning": 20,
        },
        "anthropic",
        "openinference.instrumentation.anthropic",
        "1.2.0",
    )
    assert usage.to_dict() == {
        "uncached": 500,
        "cache_write": 500,
        "cache_read": 4000,
        "output": 77,
        "reasoning": 20,
        "prompt_total": 5000,
    }


def test_openinference_bedrock_reports_input_without_cache():
    usage = normalise_usage(
        {
            "llm.token_count.prompt": 300,
            "llm.token_count.prompt_details.cache_read": 4000,
            "llm.token_count.prompt_details.cache_write": 0,
        },
        "aws.bedrock",
        "openinference.instrumentation.bedrock",
        "0.1.30",
    )
    assert (usage.uncached, usage.prompt_total) == (300, 4300)


def test_legacy_openllmetry_names():
    usage = normalise_usage(
        {
            "gen_ai.usage.prompt_tokens": 1500,
            "gen_ai.usage.completion_tokens": 10,
            "gen_ai.usage.cache_read_input_tokens": 1000,
            "gen_ai.usage.cache_creation_input_tokens": 400,
            "llm.usage.total_tokens": 1510,
        },
        "anthropic",
        "opentelemetry.instrumentation.anthropic",
        "0.40.1",
    )
    assert usage.to_dict() == {
        "uncached": 100,
        "cache_write": 400,
        "cache_read": 1000,
        "output": 10,
        "reasoning": None,
        "prompt_total": 1500,
    }
    assert usage.raw["llm.usage.total_tokens"] == 1510


def test_an_old_openllmetry_anthropic_reports_input_without_cache():
    usage = normalise_usage(
        {
            "gen_ai.usage.prompt_tokens": 10,
            "gen_ai.usage.cache_read_input_tokens": 1000,
            "gen_ai.usage.cache_creation_input_tokens": 0,
        },
        "anthropic",
        "opentelemetry.instrumentation.anthropic",
        "0.30.0",
    )
    assert (usage.uncached, usage.prompt_total) == (10, 1010)


def test_cache_larger_than_input_reveals_an_exclusive_emitter():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 3,
            "gen_ai.usage.cache_read.input_tokens": 16_399,
            "gen_ai.usage.cache_creation.input_tokens": 2_089,
        },
        "anthropic",
    )
    assert (usage.uncached, usage.prompt_total) == (3, 18_491)
    assert "read as excluding cached tokens" in usage.notes[0]


def test_pydantic_ai_details_are_not_added_on_top():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 900,
            "gen_ai.usage.cache_read.input_tokens": 600,
            "gen_ai.usage.cache_creation.input_tokens": 200,
            "gen_ai.usage.details.cache_read_tokens": 600,
            "gen_ai.usage.details.cache_write_tokens": 200,
        },
        "anthropic",
    )
    assert (usage.uncached, usage.cache_read, usage.cache_write, usage.prompt_total) == (100, 600, 200, 900)


def test_logfire_keeps_cache_figures_only_in_the_raw_usage():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 900,
            "gen_ai.usage.raw": json.dumps(
                {"input_tokens": 100, "cache_read_input_tokens": 600, "cache_creation_input_tokens": 200}
            ),
        },
        "anthropic",
    )
    assert (usage.uncached, usage.cache_read, usage.cache_write) == (100, 600, 200)


@pytest.mark.parametrize(
    "spelling, expected",
    [
        ("Anthropic", "anthropic"),
        ("MistralAI", "mistral_ai"),
        ("az.ai.openai", "azure.ai.openai"),
        ("xai", "x_ai"),
        ("vertex_ai", "gcp.vertex_ai"),
        ("AWS", "aws.bedrock"),
        (None, ""),
    ],
)
def test_provider_spellings(spelling, expected):
    assert provider_name(spelling) == expected


def test_openinference_anthropic_leaves_zero_cache_figures_out():
    usage = normalise_usage(
        {
            "llm.token_count.prompt": 2136,
            "llm.token_count.prompt_details.cache_write": 1824,
            "llm.token_count.completion": 71,
        },
        "anthropic",
        "openinference.instrumentation.anthropic",
        "3.1.0",
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read, usage.reasoning) == (312, 1824, 0, None)
    assert usage.notes == (
        "cache_read taken as 0: openinference.instrumentation.anthropic leaves zero figures out",
    )


def test_an_openinference_anthropic_whose_stream_sent_no_cache_figures_leaves_them_unknown():
    usage = normalise_usage(
        {"llm.token_count.prompt": 2136, "llm.token_count.completion": 71},
        "anthropic",
        "openinference.instrumentation.anthropic",
        "1.0.2",
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read) == (None, None, None)


@pytest.mark.parametrize("spelling", ["gemini", "gcp.gemini", "vertex_ai", "google"])
def test_gemini_zero_figures_and_cache_writes(spelling):
    """google-genai's instrumentation passes on what the API sends, which leaves zero figures out."""
    usage = normalise_usage(
        {"gen_ai.usage.input_tokens": 1549, "gen_ai.usage.output_tokens": 97},
        provider_name(spelling),
        "opentelemetry.util.genai.handler",
        "1.1b0",
    )
    assert usage.to_dict() == {
        "uncached": 1549,
        "cache_write": 0,
        "cache_read": 0,
        "output": 97,
        "reasoning": 0,
        "prompt_total": 1549,
    }


def test_the_same_scope_for_openai_leaves_figures_it_never_sends_unknown():
    usage = normalise_usage(
        {"gen_ai.usage.input_tokens": 1412, "gen_ai.usage.output_tokens": 64},
        "openai",
        "opentelemetry.util.genai.handler",
        "1.1b0",
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read, usage.reasoning) == (None, None, None, None)


def test_openllmetry_openai_drops_the_cache_write_so_it_stays_unknown():
    usage = normalise_usage(
        {
            "gen_ai.usage.input_tokens": 1412,
            "gen_ai.usage.cache_read.input_tokens": 256,
            "gen_ai.usage.output_tokens": 64,
        },
        "openai",
        "opentelemetry.instrumentation.openai.v1",
        "0.62.4",
    )
    assert (usage.uncached, usage.cache_write, usage.cache_read, usage.prompt_total) == (
        None,
        None,
        256,
        1412,
    )
    assert usage.notes == ()


def test_anthropics_cache_diagnosis_from_openinference_metadata_is_kept_with_the_usage():
    from ctxcore.analysis import limits

    metadata = {"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 1824}}
    usage = normalise_usage(
        {"llm.token_count.prompt": 2136, "metadata": json.dumps(metadata)},
        "anthropic",
        "openinference.instrumentation.anthropic",
        "3.1.0",
    )
    assert usage.raw["anthropic.diagnostics.cache_miss_reason.type"] == "system_changed"
    assert usage.raw["anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens"] == 1824
    assert limits.provider_diagnosis(usage.raw) == "system_changed"


@pytest.mark.parametrize(
    "metadata",
    [
        "not json",
        json.dumps(["cache_miss_reason"]),
        json.dumps({"cache_miss_reason": None}),  # still pending at the provider
        json.dumps({"cache_miss_reason": {"type": 7}}),
        json.dumps({"user": "metadata of the app's own"}),
    ],
)
def test_metadata_without_a_diagnosis_adds_nothing(metadata):
    usage = normalise_usage({"llm.token_count.prompt": 10, "metadata": metadata})
    assert not [key for key in usage.raw if key.startswith("anthropic.diagnostics.")]


def test_a_diagnosis_with_junk_tokens_keeps_only_its_reason():
    metadata = {"cache_miss_reason": {"type": "tools_changed", "cache_missed_input_tokens": -3}}
    usage = normalise_usage({"llm.token_count.prompt": 10, "metadata": json.dumps(metadata)})
    assert usage.raw == {
        "llm.token_count.prompt": 10,
        "anthropic.diagnostics.cache_miss_reason.type": "tools_changed",
    }
