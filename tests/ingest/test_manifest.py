import pytest

from ctxcore.vocabulary import digest
from ingest import manifest


def document(**changes):
    value = {
        "schema": "ctxview.manifest/1",
        "items": [
            {
                "id": "a",
                "kind": "file",
                "bucket": "retrieved",
                "hash": digest("x"),
                "tokens": 12,
                "source": "billing.ts",
                "version": "v2",
                "supersedes": ["b"],
                "mode": "excerpt",
                "trust": "external",
                "origin_turn": 3,
                "cache_breakpoint": True,
            }
        ],
        "excluded": [{"id": "b", "reason": "superseded", "version": "v1"}],
        "prompt_version": "p7",
    }
    value.update(changes)
    return value


def test_parses_every_field():
    parsed = manifest.parse(document())
    item = parsed.items[0]
    assert (item.id, item.kind, item.bucket, item.mode, item.tokens, item.tokens_estimated) == (
        "a",
        "file",
        "retrieved",
        "excerpt",
        12,
        False,
    )
    assert (
        item.source,
        item.version,
        item.supersedes,
        item.trust,
        item.origin_turn,
        item.cache_breakpoint,
    ) == ("billing.ts", "v2", ("b",), "external", 3, True)
    assert parsed.excluded == (
        {"id": "b", "reason": "superseded", "tokens": None, "kind": None, "source": None, "version": "v1"},
    )
    assert parsed.prompt_version == "p7"


@pytest.mark.parametrize(
    "value, message",
    [
        ("{not json", "not valid JSON"),
        ([], "must be a JSON object"),
        ({"schema": "other/2"}, "schema 'other/2' is not supported"),
        (document(items={"a": 1}), "items must be a list"),
        (
            document(items=[{"id": "a", "kind": "k", "bucket": "nope", "hash": "h"}]),
            "items[0].bucket: 'nope' is not one of",
        ),
        (
            document(items=[{"id": "a", "kind": "k", "bucket": "other", "hash": "h", "tokens": -1}]),
            "items[0].tokens must be a whole number of at least 0",
        ),
        (
            document(items=[{"id": "a", "kind": "k", "bucket": "other", "hash": "h"}] * 2),
            "items[1].id 'a' appears twice",
        ),
        (document(excluded=[{"id": "b"}]), "excluded[0].reason is required"),
        (document(budget=[1]), "budget must be an object"),
    ],
)
def test_rejects_with_a_message_naming_the_field(value, message):
    with pytest.raises(manifest.ManifestError) as error:
        manifest.parse(value)
    assert message in str(error.value)


def test_content_that_does_not_match_its_hash_is_a_warning():
    value = document(items=[{"id": "a", "kind": "k", "bucket": "other", "hash": digest("x"), "content": "y"}])
    assert manifest.parse(value).warnings == ("items[0] (a): content does not match its hash",)


def test_reads_whether_the_sender_estimated_its_tokens():
    value = document(
        items=[
            {"id": "a", "kind": "k", "bucket": "other", "hash": "h", "tokens": 9, "tokens_estimated": True}
        ]
    )
    assert manifest.parse(value).items[0].tokens_estimated is True
