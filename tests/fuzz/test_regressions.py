"""The bugs the fuzzers found, one test each: every one failed a batch of acknowledged spans for ever (an
exception the task does not expect is retried and swept again and again) or failed it with the other
spans in it (a value PostgreSQL refuses)."""

import pytest

from ingest import manifest, normalise, storable
from ingest.usage import normalise_usage
from tests.fuzz.storable import assert_storable


def record_for(attributes: dict) -> normalise.CallRecord:
    row = {
        "trace_id": "01" * 16,
        "span_id": "02" * 8,
        "name": "chat",
        "start_time_unix_nano": 1,
        "end_time_unix_nano": 2,
        "attributes": {"gen_ai.operation.name": "chat", **attributes},
    }
    return normalise.call_record(row, {})


def test_a_flattened_index_that_isdigit_but_is_not_a_number_is_ignored():
    # "²".isdigit() is true, int("²") raises ValueError.
    record = record_for(
        {"llm.input_messages.².message.role": "user", "llm.input_messages.0.message.content": "hi"}
    )
    assert [item.role for item in record.items] == ["user"]


@pytest.mark.parametrize("value", ["²", "9" * 5000, 2**40, "2147483648"])
def test_a_turn_hint_that_is_no_column_value_is_ignored(value):
    assert record_for({"ctxview.turn": value}).turn_hint is None


@pytest.mark.parametrize("value", ["²", "9" * 5000, 2**62, 2**63 - 1, float(2**60)])
def test_a_token_figure_that_is_no_plausible_count_is_unknown(value):
    # Two calls of 2**62 tokens overflowed the run's 64-bit totals, failing every later batch of the run.
    usage = normalise_usage({"gen_ai.usage.input_tokens": value, "gen_ai.usage.output_tokens": 5})
    assert (usage.prompt_total, usage.output) == (None, 5)


@pytest.mark.parametrize("field", ["tokens", "origin_turn"])
def test_a_manifest_number_too_big_for_its_column_is_a_manifest_error(field):
    item = {"id": "a", "kind": "message", "hash": "0" * 32, field: 2**31}
    with pytest.raises(manifest.ManifestError, match=f"items\\[0\\].{field} is larger than"):
        manifest.parse({"schema": "ctxview.manifest/1", "items": [item]})


@pytest.mark.parametrize(
    "text",
    [
        '[{"role": "user", "parts": [{"type": "text", "content": "a\\u0000b"}]}]',
        '[{"role": "user", "parts": [{"type": "text", "content": "\\ud800"}]}]',
        '[{"role": "assistant", "parts": [{"type": "tool_call", "name": "\\udfff", "id": "\\u0000"}]}]',
        '[{"\\u0000role": "user", "parts": []}]',
    ],
)
def test_json_escapes_that_postgresql_cannot_store_are_replaced(text):
    record = record_for({"gen_ai.input.messages": text, "gen_ai.output.messages": text})
    assert record.items
    for item in record.items:
        assert_storable(item.content)
    assert_storable(list(record.tool_calls))


def test_nan_in_json_content_leaves_the_text_as_text():
    record = record_for(
        {"gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "tool_call", "name": NaN}]}]'}
    )
    assert_storable(list(record.tool_calls))
    with pytest.raises(ValueError):
        storable.json_value("[NaN]")


@pytest.mark.parametrize(
    "key", ["gen_ai.input.messages", "ctxview.manifest", "gen_ai.usage.raw", "gen_ai.tool.definitions"]
)
def test_json_nested_past_the_recursion_limit_is_not_json(key):
    record = record_for({key: "[" * 5000 + "]" * 5000})
    assert_storable(list(record.notes))


def test_a_manifest_in_json_with_escapes_postgresql_cannot_store():
    parsed = manifest.parse(
        '{"schema": "ctxview.manifest/1", "excluded": [{"id": "x\\u0000", "reason": "r"}], '
        '"items": [{"id": "\\u0000", "kind": "k", "hash": "h", "content": "\\ud800"}]}'
    )
    assert_storable([item.to_dict() for item in parsed.items] + [item.content for item in parsed.items])
    assert_storable(parsed.excluded)
