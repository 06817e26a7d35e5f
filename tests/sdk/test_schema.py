"""schemas/manifest-v1.schema.json: valid JSON, the expected shape, and in step with the SDK's constants."""

import json
from pathlib import Path

import pytest

from ctxview_sdk import manifest

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "manifest-v1.schema.json"


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def test_schema_is_draft_2020_12_with_the_expected_top_level(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"schema", "prompt_version", "budget", "items", "excluded"}
    assert schema["properties"]["schema"]["const"] == manifest.SCHEMA
    assert set(schema["required"]) == {"schema", "items"}
    assert set(schema["properties"]["budget"]["properties"]) == {"limit", "input", "reserved_output"}


def test_schema_item_fields_are_the_fields_the_sdk_writes(schema):
    item = schema["$defs"]["item"]
    written = manifest.Item(id="a", kind="fact", bucket="memory", hash="0" * 32).to_dict()
    assert set(item["properties"]) == set(written)
    assert set(item["required"]) == {"id", "kind", "bucket", "hash"}
    excluded = schema["$defs"]["excluded"]
    assert set(excluded["properties"]) == set(manifest.Excluded(id="a", reason="budget").to_dict())
    assert set(excluded["required"]) == {"id", "reason"}


def test_schema_enums_and_bounds_match_the_sdk(schema):
    item = schema["$defs"]["item"]["properties"]
    assert tuple(item["bucket"]["enum"]) == manifest.BUCKETS
    assert tuple(item["mode"]["enum"]) == manifest.MODES
    assert tuple(item["role"]["enum"]) == (*manifest.ROLES, None)
    assert tuple(item["trust"]["enum"]) == (*manifest.TRUSTS, None)
    assert item["hash"]["pattern"] == "^[0-9a-f]{32}$"
    assert item["content"]["maxLength"] == manifest.MAX_CONTENT
    assert schema["properties"]["items"]["maxItems"] == manifest.MAX_ITEMS
    assert schema["properties"]["excluded"]["maxItems"] == manifest.MAX_EXCLUDED
    assert schema["$defs"]["id"]["maxLength"] == manifest.MAX_ID
    assert schema["$defs"]["text"]["maxLength"] == manifest.MAX_TEXT
    assert schema["$defs"]["source"]["maxLength"] == manifest.MAX_SOURCE
    assert schema["properties"]["prompt_version"]["maxLength"] == manifest.MAX_TEXT
