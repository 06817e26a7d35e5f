"""Secrets are masked before anything is stored; hash-only projects keep hashes, not content."""

import re
import zlib

import pytest
from django.apps import apps
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.models import Call, Content, RawBatch
from ingest.redact import DEFAULT_PATTERNS, PatternError, Redactor
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import TRACE, send  # noqa: F401  (the fixture)

SECRET = "sk-ant-api03-Zx9QmT4vLp7RsW2yKd8HnB5cFj3gVx"
EMAIL = "jane.doe@example.com"


def everything_stored() -> str:
    """Every row of every table, as text, plus the raw batches decompressed."""
    parts = []
    for model in apps.get_models():
        for row in model.objects.values():
            parts.append(repr(row))
    for body in RawBatch.objects.values_list("body", flat=True):
        if body:
            parts.append(zlib.decompress(bytes(body)).decode("utf-8", "replace"))
    return "\n".join(parts)


def request_with(text: str, number: int = 1) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=TRACE,
        number=number,
        messages=[user_message(text)],
        attributes={"gen_ai.conversation.id": "c", "input.value": text, "gen_ai.usage.input_tokens": 50},
    )
    request.resource_spans[0].scope_spans[0].spans[0].events.add(
        name="gen_ai.content.prompt"
    ).attributes.append(factories.kv("gen_ai.prompt", text))
    return request


def test_default_patterns_mask_keys_and_emails():
    redactor = Redactor.from_patterns(DEFAULT_PATTERNS)
    assert redactor.mask(f"key {SECRET}, mail {EMAIL}, AKIAABCDEFGHIJKLMNOP") == (
        "key [REDACTED:api_key], mail [REDACTED:email], [REDACTED:aws_access_key]"
    )
    assert redactor.mask("nothing secret here") == "nothing secret here"


def test_bad_patterns_are_refused_with_a_message():
    with pytest.raises(PatternError, match="pattern broken"):
        Redactor.from_patterns([("broken", "([a-z")])
    with pytest.raises(PatternError, match="use lower-case letters"):
        Redactor.from_patterns([("Bad Name", "x")])


def test_a_secret_sent_in_a_prompt_is_nowhere_in_the_database(send, project):  # noqa: F811
    send(request_with(f"Use the key {SECRET} and mail {EMAIL} when done."))
    stored = everything_stored()
    assert SECRET not in stored
    assert EMAIL not in stored
    assert "[REDACTED:api_key]" in stored
    call = Call.objects.get()
    text = Content.objects.get(hash=call.items[0]["hash"]).text
    assert "Use the key [REDACTED:api_key] and mail [REDACTED:email] when done." in text
    assert RawBatch.objects.get().redacted == 3  # the message, input.value and the span event


def test_a_project_without_patterns_keeps_the_text(send, project):  # noqa: F811
    project.redaction_patterns = []
    project.save()
    send(request_with(f"mail {EMAIL}"))
    assert EMAIL in everything_stored()


def test_hash_only_keeps_hashes_and_token_counts_but_no_content(send, project):  # noqa: F811
    project.hash_only = True
    project.save()
    text = "The deploy window is Tuesday 14:00 UTC; the rollback owner is team Falcon."
    send(request_with(text))
    send(request_with(text + " And what about Wednesday?", number=2))
    stored = everything_stored()
    assert "rollback owner is team Falcon" not in stored
    assert Content.objects.count() == 0
    calls = list(Call.objects.order_by("seq"))
    assert [len(call.items) for call in calls] == [1, 1]
    assert all(item["tokens"] > 0 and len(item["hash"]) == 32 for call in calls for item in call.items)
    assert calls[1].analysis is not None  # the analyses work on hashes and counts
    assert set(RawBatch.objects.values_list("status", flat=True)) == {"done"}


@pytest.mark.parametrize(("name", "pattern"), DEFAULT_PATTERNS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_quick_check_on_raw_bytes_never_misses_a_default_pattern(name, pattern, data):
    secret = data.draw(st.from_regex(pattern, fullmatch=True))
    around = data.draw(st.binary(max_size=40))
    redactor = Redactor.from_patterns(DEFAULT_PATTERNS)
    if re.search(pattern, secret):  # as it would be found in the string value
        assert redactor.might_match(around + secret.encode() + around)


def test_the_quick_check_passes_batches_without_secrets_and_other_patterns():
    redactor = Redactor.from_patterns(DEFAULT_PATTERNS)
    assert not redactor.might_match(b"\x0a\x12plain words, no keys: desk-top, a bear @ home")
    # A project's own pattern is not screened on bytes: there \w is ASCII-only and would miss this.
    own = Redactor.from_patterns([("nick", r"\w\w\wx")])
    assert re.search(r"\w\w\wx", "äääx") and not re.search(rb"\w\w\wx", "äääx".encode())
    assert own.might_match("äääx".encode())
    assert own.mask("äääx") == "[REDACTED:nick]"
