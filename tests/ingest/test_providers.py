"""The providers table (ingest/families/providers.py) against the recordings of the real instrumentations:
each row that names a scenario holds for that recording's model-call spans, and what the row claims
(zeros left out, figures dropped, how finish reasons arrive) is what the recording shows."""

import functools
from pathlib import Path

import pytest

from ingest import families, normalise, semconv
from ingest.families import providers
from ingest.families.messages import parse_json
from tests.ingest.test_normalise_captured import load

FIXTURES = Path(__file__).parent.parent / "data" / "otlp"
ROWS = [row for row in providers.INSTRUMENTATIONS if row.scenario]

# The usage keys of each figure (any family's), and the description's name for it.
FIGURE_KEYS = {
    providers.CACHE_READ: families.CACHE_READ_TOKENS,
    providers.CACHE_WRITE: families.CACHE_WRITE_TOKENS,
    providers.REASONING: families.REASONING_TOKENS,
}


@functools.cache
def model_calls(scenario: str) -> list[tuple[dict, dict, str]]:
    """(description call, span row, provider) for each model call the recording describes."""
    description, spans, _ = load(FIXTURES / f"{scenario}.json")
    calls = []
    for call in description["calls"]:
        _, row = spans[call["span"]["span_id"]]
        provider = providers.provider_name(normalise._first_text(row["attributes"], semconv.PROVIDER)[0])
        calls.append((call, row, provider))
    return calls


def every_recorded_call():
    return [entry for path in sorted(FIXTURES.glob("*.json")) for entry in model_calls(path.stem)]


def test_every_row_names_its_recording_or_is_a_rule_from_the_sources():
    for row in providers.INSTRUMENTATIONS:
        assert row.scenario or row.recording or row.since or row.before or row.input_excludes_cache, row.label
        if row.scenario:
            assert (FIXTURES / f"{row.scenario}.json").exists(), row.scenario
        if row.recording:
            assert (FIXTURES.parent / "recordings" / f"{row.recording}.json").exists(), row.recording
        assert row.family in {family.name for family in families.FAMILIES}, row.family


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.scenario)
def test_the_row_holds_for_its_recording_and_says_what_it_shows(row):
    calls = model_calls(row.scenario)
    assert calls
    for _, span, provider in calls:
        assert row.holds_for(span["scope_name"], span["scope_version"], provider), span["scope_name"]
    # Usage claims hold for every recording of the instrumentation; finish reasons for the scenario.
    recorded = calls
    calls = [
        (call, span, provider)
        for call, span, provider in every_recorded_call()
        if row.holds_for(span["scope_name"], span["scope_version"], provider)
    ]

    for figure in row.zeros_left_out:
        # Some call had a 0 from the provider, and the span has no key for it.
        left_out = [
            call
            for call, span, _ in calls
            if call["canonical"][figure] == 0 and not set(FIGURE_KEYS[figure]) & set(span["attributes"])
        ]
        assert left_out, f"{row.scenario} never leaves {figure} out"
        # ...and when the figure is not 0 the span carries it.
        for call, span, _ in calls:
            if call["canonical"][figure]:
                assert set(FIGURE_KEYS[figure]) & set(span["attributes"]), (figure, call["index"])
    for figure in row.dropped:
        dropped = [
            call
            for call, span, _ in calls
            if call["canonical"][figure] and not set(FIGURE_KEYS[figure]) & set(span["attributes"])
        ]
        assert dropped, f"{row.scenario} never drops a {figure} the provider sent"

    calls = recorded
    sent = [
        next((span["attributes"][key] for key in semconv.FINISH_REASONS if key in span["attributes"]), None)
        for _, span, _ in calls
    ]
    if row.finish_reasons in (providers.NONE, providers.ON_MESSAGES):
        assert sent == [None] * len(calls)
    if row.finish_reasons == providers.ON_MESSAGES:
        for _, span, _ in calls:
            messages = parse_json(span["attributes"]["gen_ai.output.messages"])
            assert all(message.get("finish_reason") for message in messages)
    if row.finish_reasons == providers.STOP_FOR_TOOL_CALLS:
        asked = [reason for (call, _, _), reason in zip(calls, sent, strict=True) if call["tool_calls"]]
        assert asked and {parse_json(reason) for reason in asked} == {"stop"}


def test_gemini_says_stop_for_a_tool_call_in_its_recording():
    """The provider row's stop_for_tool_calls, shown by the google-genai recording."""
    asked = [
        parse_json(span["attributes"]["gen_ai.response.finish_reasons"])
        for call, span, provider in model_calls("google-genai")
        if call["tool_calls"]
    ]
    assert asked == [["stop"]]
    assert providers.provider("gcp.gemini").stop_for_tool_calls


@pytest.mark.parametrize(
    "spelling, expected",
    [
        ("gemini", "gcp.gemini"),
        ("gcp.gemini", "gcp.gemini"),
        ("vertex_ai", "gcp.vertex_ai"),
        ("VertexAI", "gcp.vertex_ai"),
        ("gcp.vertex_ai", "gcp.vertex_ai"),
        ("google", "gcp.gen_ai"),
        ("gcp.gen_ai", "gcp.gen_ai"),
        ("Azure", "azure.ai.openai"),
        ("moonshot", "moonshot_ai"),
        ("acme", "acme"),
    ],
)
def test_every_spelling_means_its_provider(spelling, expected):
    assert providers.provider_name(spelling) == expected


def test_every_google_name_has_no_per_request_cache_writes():
    for spelling in ("gemini", "gcp.gemini", "vertex_ai", "gcp.vertex_ai", "google", "gcp.gen_ai"):
        row = providers.provider(providers.provider_name(spelling))
        assert row is not None and not row.cache_writes and row.stop_for_tool_calls, spelling


def test_no_spelling_means_two_providers():
    spellings = [spelling for row in providers.PROVIDERS for spelling in (row.name, *row.spellings)]
    assert len(spellings) == len(set(spellings))


@pytest.mark.parametrize(
    "scope, version, provider, holds",
    [
        ("openinference.instrumentation.anthropic", "3.1.0", "anthropic", True),
        ("openinference.instrumentation.anthropic", "1.1.0", "anthropic", False),  # streaming sent none
        ("openinference.instrumentation.anthropic", "", "anthropic", False),  # no version: not known
        ("opentelemetry.util.genai.handler", "1.1b0", "gcp.gemini", True),
        ("opentelemetry.util.genai.handler", "1.1b0", "openai", False),  # openai-v2: another row
        ("opentelemetry.util.genaix", "1.1b0", "gcp.gemini", False),  # a scope is matched by its parts
    ],
)
def test_a_row_holds_by_scope_version_and_provider(scope, version, provider, holds):
    zero_rows = [row for row in providers.instrumentations(scope, version, provider) if row.zeros_left_out]
    assert bool(zero_rows) is holds


@pytest.mark.parametrize(
    "word, expected",
    [
        ("tool_use", "tool_call"),
        ("tool_calls", "tool_call"),
        ("end_turn", "stop"),
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("SAFETY", "content_filter"),
        ("pause_turn", "pause_turn"),  # no OTel value: kept as sent
    ],
)
def test_finish_reasons_in_the_otel_vocabulary(word, expected):
    assert providers.finish_reason(word) == expected
