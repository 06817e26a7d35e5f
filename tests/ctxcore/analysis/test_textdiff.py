"""Byte diffs, volatile values and JSON key order."""

import pytest

from ctxcore.analysis.limits import one_hour_tokens, provider_diagnosis
from ctxcore.analysis.textdiff import byte_diff, moved_keys, same_json_other_order, volatile_kind


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("Today is 2026-11-29.", "Today is 2026-11-30.", "date"),
        ("Now: 2026-11-29T10:00:00Z.", "Now: 2026-11-29T10:05:00Z.", "timestamp"),
        ("At 10:00 sharp", "At 10:05 sharp", "time"),
        ("Today is Monday", "Today is Tuesday", "date"),
        (
            "Session 3f2a9c1e-1111-2222-3333-444455556666",
            "Session 9b0e7d2a-1111-2222-3333-444455556666",
            "uuid",
        ),
        ("Request #41 of the run", "Request #42 of the run", "counter"),
        ("Be brief.", "Be thorough.", None),
        ("You are helpful.", "You are very helpful.", None),
        ("same", "same", None),
    ],
)
def test_volatile_values_are_recognised(old, new, kind):
    assert volatile_kind(old, new) == kind


def test_the_byte_diff_shows_only_what_changed_with_context():
    assert byte_diff("Be brief. Cite sources.", "Be thorough. Cite sources.") == {
        "offset": 3,
        "before": "Be ",
        "old": "brief",
        "new": "thorough",
        "after": ". Cite sources.",
    }


def test_equal_json_in_another_key_order_is_recognised():
    assert same_json_other_order('{"a": 1, "b": [1, 2]}', '{"b": [1, 2], "a": 1}')
    assert not same_json_other_order('{"a": 1}', '{"a": 2}')
    assert not same_json_other_order("not json", "not json either")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ({"gen_ai.usage.cache_miss_reason": "tools_changed"}, "tools_changed"),
        ({"gen_ai.usage.cache_miss_reason": '{"type": "system_changed"}'}, "system_changed"),
        ({"gen_ai.usage.diagnostics.cache_miss_reason.type": "model_changed"}, "model_changed"),
        ({"gen_ai.usage.cache_missed_input_tokens": 1200}, None),
        ({}, None),
    ],
)
def test_the_providers_cache_miss_reason_is_read_from_the_raw_usage(raw, reason):
    assert provider_diagnosis(raw) == reason


def test_the_one_hour_cache_marker_is_read_from_the_raw_usage():
    assert one_hour_tokens({"gen_ai.usage.cache_creation.ephemeral_1h_input_tokens": "1500"}) == 1500
    assert one_hour_tokens({"gen_ai.usage.cache_creation.ephemeral_5m_input_tokens": 1500}) == 0


def test_moved_keys_name_each_object_whose_keys_moved_outermost_first():
    old = '{"name": "read", "input_schema": {"type": "object", "properties": {"path": {}, "limit": {}}}}'
    new = '{"input_schema": {"properties": {"limit": {}, "path": {}}, "type": "object"}, "name": "read"}'
    assert moved_keys(old, new) == [
        {"where": "the top level", "before": ["name", "input_schema"], "after": ["input_schema", "name"]},
        {"where": "input_schema", "before": ["type", "properties"], "after": ["properties", "type"]},
        {"where": "input_schema.properties", "before": ["path", "limit"], "after": ["limit", "path"]},
    ]
    assert moved_keys('[{"a": 1, "b": 2}]', '[{"b": 2, "a": 1}]')[0]["where"] == "[0]"
    assert moved_keys('{"a": 1}', '{"a": 2}') == []  # another value, not another order
