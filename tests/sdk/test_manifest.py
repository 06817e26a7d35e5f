"""Hashes, ids, rendering and validation of items: the rules the ingest side relies on."""

import hashlib
import json
from dataclasses import fields

import pytest

from ctxcore import vocabulary
from ctxview_sdk.manifest import Excluded, Item, Manifest, content_hash, message_id, render


def test_hash_is_first_32_hex_of_sha256_of_utf8_text():
    assert content_hash("héllo") == hashlib.sha256("héllo".encode()).hexdigest()[:32]
    assert content_hash("abc") == "ba7816bf8f01cfea414140de5dae2223"


def test_render_keeps_text_as_is_and_json_compact_in_caller_key_order():
    assert render("  text\n") == "  text\n"
    assert render({"b": 1, "a": ["é", None]}) == '{"b":1,"a":["é",null]}'


def test_same_json_with_another_key_order_gets_another_hash():
    # This is what breaks a provider's prompt cache, so it must show.
    first = render({"name": "search", "input_schema": {"type": "object"}})
    second = render({"input_schema": {"type": "object"}, "name": "search"})
    assert json.loads(first) == json.loads(second)
    assert content_hash(first) != content_hash(second)


def test_message_id_is_msg_and_12_hex_of_sha256_of_role_plus_content():
    expected = "msg:" + hashlib.sha256(b"userhello").hexdigest()[:12]
    assert message_id("user", "hello") == expected
    assert message_id("assistant", "hello") != expected


def test_item_rejects_an_unknown_bucket():
    with pytest.raises(ValueError, match="bucket"):
        Item(id="a", kind="fact", bucket="facts", hash="0" * 32)


@pytest.mark.parametrize(
    "field, value",
    [
        ("hash", "ABCDEF" + "0" * 26),
        ("hash", "0" * 31),
        ("tokens", -1),
        ("tokens", True),
        ("role", "developer"),
        ("mode", "full"),
        ("trust", "web"),
        ("origin_turn", 0),
        ("id", ""),
        ("kind", "x" * 65),
    ],
)
def test_item_rejects_bad_fields(field, value):
    fields = {"id": "a", "kind": "fact", "bucket": "memory", "hash": "0" * 32, field: value}
    with pytest.raises(ValueError):
        Item(**fields)


def test_excluded_takes_any_reason_word_but_not_an_empty_one():
    assert Excluded(id="a", reason="my_own_reason").to_dict()["reason"] == "my_own_reason"
    with pytest.raises(ValueError):
        Excluded(id="a", reason="")


def test_manifest_without_content_marks_dropped_content_truncated():
    item = Item(id="a", kind="fact", bucket="memory", hash="0" * 32, content="secret")
    data = Manifest(items=[item]).to_dict(with_content=False)
    assert (data["items"][0]["content"], data["items"][0]["content_truncated"]) == (None, True)


def test_the_sdk_renders_and_hashes_as_the_server_does_a_lone_surrogate_included():
    from ctxcore import vocabulary
    from ctxview_sdk import manifest as sdk_manifest

    value = {"b": 1, "a": ["x\ud800", 2.5]}
    assert sdk_manifest.render(value) == vocabulary.render(value) == '{"b":1,"a":["x\ud800",2.5]}'
    assert sdk_manifest.content_hash("x\ud800") == vocabulary.digest("x\ud800")


def test_a_message_id_follows_the_write_sides_rule_and_takes_a_lone_surrogate():
    # One rule (ctxcore.vocabulary.message_id) over a rendering that names the role: the SDK's ids are
    # those it gave before the rule moved there, and a lone surrogate no longer raises.
    assert message_id("user", "hello") == vocabulary.message_id(vocabulary.digest("userhello"))
    assert message_id("user", "\ud800") == "msg:" + vocabulary.digest("user\ud800")[:12]
    assert message_id("user", "ok") != message_id("assistant", "ok")


def test_an_item_has_the_vocabularys_fields_and_writes_all_but_its_position():
    assert issubclass(Item, vocabulary.Item)
    written = Item(id="a", kind="fact", bucket="memory", hash="0" * 32).to_dict()
    assert set(written) == {field.name for field in fields(vocabulary.Item)} - {"position"}
    # A sender's count is its own, not an estimate, unless it says so.
    assert written["tokens_estimated"] is False
