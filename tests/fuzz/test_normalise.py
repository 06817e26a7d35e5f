"""Hostile attributes through the normaliser: call records, manifests and usage.

The normaliser runs inside the batch task: an exception there fails the batch for ever (it is retried
and swept again and again), and a value PostgreSQL refuses (NUL, a lone surrogate, NaN, a number too
big for its column) fails the whole batch with the other spans in it. So: no exception but the
documented ones, and everything it returns is storable.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ingest import families, manifest, normalise, otlp, storable
from ingest.families import logfire, otel_genai, pydantic_ai
from ingest.usage import normalise_usage, provider_name
from tests.fuzz import strategies
from tests.fuzz.conftest import CASES, bounded, budget
from tests.fuzz.storable import assert_storable

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")

INT32 = 2**31 - 1  # PositiveIntegerField: turn hints, item tokens, seq
INT64 = 2**63 - 1  # BigIntegerField: usage figures, times


def span_row(draw, operation: str | None = None) -> dict:
    attributes = otlp.attributes(draw(strategies.attributes()))
    if operation is not None:
        attributes[normalise.semconv.OPERATION_NAME] = operation
    events = [
        {
            "name": draw(st.sampled_from(strategies.EVENT_NAMES)),
            "attributes": otlp.attributes(draw(strategies.attributes(max_size=4))),
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    return {
        "trace_id": "01" * 16,
        "span_id": "02" * 8,
        "parent_span_id": draw(st.sampled_from(["", "03" * 8])),
        "name": storable.nul_free(draw(st.text(max_size=20))),
        "start_time_unix_nano": draw(st.integers(0, INT64)),
        "end_time_unix_nano": draw(st.integers(0, INT64)),
        "scope_name": draw(st.sampled_from(["", "pydantic-ai", "openinference.instrumentation.bedrock"])),
        "scope_version": draw(st.sampled_from(["", "0.1.0", "9" * 200])),
        "attributes": attributes,
        "events": events,
    }


def log_events(draw) -> list[normalise.Event]:
    result = []
    for _ in range(draw(st.integers(0, 3))):
        body = draw(st.one_of(st.none(), strategies.any_values()))
        result.append(
            normalise.Event(
                draw(st.sampled_from(strategies.EVENT_NAMES)),
                otlp.attributes(draw(strategies.attributes(max_size=4))),
                otlp.any_value(body) if body is not None else None,
            )
        )
    return result


def assert_record_storable(record: normalise.CallRecord) -> None:
    assert record.turn_hint is None or 1 <= record.turn_hint <= INT32
    for name, value in record.usage.to_dict().items():
        assert value is None or 0 <= value <= INT64, f"usage {name} = {value}"
    for item in record.items:
        assert item.tokens is None or 0 <= item.tokens <= INT32, f"item tokens {item.tokens}"
        assert item.origin_turn is None or 1 <= item.origin_turn <= INT32
        assert_storable(item.to_dict(), "item")
        assert_storable(item.content, "item content")
    assert_storable(
        {
            "excluded": record.excluded,
            "budget": record.budget,
            "tool_calls": record.tool_calls,
            "tool_definitions": record.tool_definitions,
            "finish_reasons": record.finish_reasons,
            "notes": record.notes,
            "usage_raw": record.usage.raw,
            "strings": [
                record.run_key,
                record.provider,
                record.request_model,
                record.response_model,
                record.agent_name,
                record.manifest_error,
                record.prompt_version,
                record.user_fingerprint,
                record.operation,
            ],
        },
        "record",
    )
    if record.budget:
        assert all(value is None or 0 <= value <= INT64 for value in record.budget.values())


@budget(150, deep=800)
@given(data=st.data(), operation=st.sampled_from(["chat", "text_completion", None]))
def test_any_model_call_span_makes_a_storable_call_record(data, operation):
    CASES["normalise: model-call spans with hostile attributes and events"] += 1
    row = span_row(data.draw, operation)
    events = log_events(data.draw)
    with bounded(30):
        record = normalise.call_record(row, {"service.name": data.draw(strategies.strings())}, events)
        kept = normalise.without_content(row["attributes"], record.moved_keys)
        bare = normalise.without_any_content(row)
    assert_record_storable(record)
    assert_storable(kept)
    assert_storable(bare)


@budget(60, deep=600)
@given(data=st.data(), kind=st.sampled_from([normalise.TOOL, normalise.AGENT]))
def test_any_tool_or_agent_span_makes_a_storable_operation(data, kind):
    CASES["normalise: tool and agent spans"] += 1
    row = span_row(data.draw)
    with bounded(30):
        normalise.classify(row["name"], row["attributes"])
        operation = normalise.operation_record(row, kind)
    assert_storable(operation)
    for name in ("arguments_bytes", "result_bytes"):
        assert operation[name] is None or 0 <= operation[name] <= INT32


@budget(200, deadline_ms=5_000, deep=8_000)
@given(
    value=st.one_of(
        strategies.manifests(),
        strategies.json_values(),
        strategies.strings(),
        st.builds(
            lambda manifest, allow_nan: strategies._json_text(manifest, allow_nan),
            strategies.manifests(),
            st.booleans(),
        ),
    )
)
def test_a_manifest_is_parsed_or_refused_with_a_manifest_error(value):
    CASES["normalise: ctxview.manifest values"] += 1
    try:
        with bounded(30):
            parsed = manifest.parse(value)
    except manifest.ManifestError as exc:
        assert_storable(str(exc))
        return
    for item in parsed.items:
        assert item.tokens is None or 0 <= item.tokens <= INT32
        assert item.origin_turn is None or 1 <= item.origin_turn <= INT32
        assert_storable(item.to_dict())
        assert_storable(item.content)
    assert_storable([parsed.excluded, parsed.budget, parsed.prompt_version, parsed.warnings])
    if parsed.budget:
        assert all(value is None or 0 <= value <= INT64 for value in parsed.budget.values())


@budget(200, deadline_ms=5_000, deep=3_000)
@given(data=st.data())
def test_usage_is_a_split_of_storable_counts_whatever_the_attributes(data):
    CASES["normalise: usage attributes"] += 1
    attributes = otlp.attributes(data.draw(strategies.attributes()))
    provider = provider_name(
        data.draw(st.one_of(st.sampled_from(["openai", "anthropic", "Azure"]), st.text(max_size=10)))
    )
    scope = data.draw(
        st.sampled_from(
            [
                "",
                "pydantic-ai",
                "openinference.instrumentation.anthropic",
                "opentelemetry.instrumentation.anthropic",
            ]
        )
    )
    version = data.draw(st.one_of(st.sampled_from(["0.1.0", "0.33.0", "1.0"]), st.text(max_size=20)))
    with bounded(30):
        usage = normalise_usage(attributes, provider, scope, version)
    for name, value in usage.to_dict().items():
        assert value is None or 0 <= value <= INT64, f"{name} = {value}"
    if None not in (usage.uncached, usage.cache_read, usage.cache_write, usage.prompt_total):
        assert usage.uncached + usage.cache_read + usage.cache_write == usage.prompt_total
    assert_storable(usage.raw)


NASTY_KEYS = [
    otel_genai.INPUT_MESSAGES,
    otel_genai.OUTPUT_MESSAGES,
    otel_genai.SYSTEM_INSTRUCTIONS,
    otel_genai.TOOL_DEFINITIONS,
    normalise.semconv.CTXVIEW_MANIFEST,
    normalise.semconv.CTXVIEW_TURN,
    logfire.RAW_USAGE,
    pydantic_ai.REQUEST_PARAMETERS,
    families.INPUT_TOKENS[0],
    families.CACHE_READ_TOKENS[0],
    normalise.semconv.FINISH_REASONS[0],
    otel_genai.LEGACY_PROMPT,
    "llm.input_messages.0.message.content",
    "llm.input_messages.².message.role",
    "llm.tools.0.tool.json_schema",
    "gen_ai.prompt.9999999999999.content",
]


@pytest.mark.parametrize("key", NASTY_KEYS)
def test_each_nasty_string_in_each_key_the_normaliser_reads(key):
    """Every string of the nasty list in every key read as JSON or as a number, also as an event body."""
    for nasty in strategies.NASTY_STRINGS:
        CASES["normalise: nasty strings x keys"] += 1
        text = storable.nul_free(nasty)  # as the decoder leaves every string it hands on
        row = {
            "trace_id": "01" * 16,
            "span_id": "02" * 8,
            "name": "chat",
            "start_time_unix_nano": 1,
            "end_time_unix_nano": 2,
            "attributes": {normalise.semconv.OPERATION_NAME: "chat", key: text},
            "events": [{"name": otel_genai.EVENT_CONTENT_PROMPT, "attributes": {"gen_ai.prompt": text}}],
        }
        events = [normalise.Event(otel_genai.EVENT_OPERATION_DETAILS, {key: text}, text)]
        with bounded(30):
            record = normalise.call_record(row, {}, events)
        assert_record_storable(record)
