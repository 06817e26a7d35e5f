"""Continued requests' windows rebuilt as batches are written (ingest.continued_calls), recorded by
ctxview's own proxy (OTel GenAI: ``openai.request.previous_response_id`` and ``gen_ai.response.id``): each
request in a trace of its own, one run named by ``ctxview.run.id``, sent in any order."""

import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from ctxview.proxy.exchange import Exchange
from ctxview.proxy.export import span_of, to_readable
from ingest.models import Call
from tests.instrumented.fake_providers import responses_reply, responses_usage

pytestmark = pytest.mark.django_db

INSTRUCTIONS = "You are a concise travel assistant."
QUESTIONS = ("The weather in Paris?", "And in Lyon?", "And in Nice?")
ANSWERS = ("Paris: sunny.", "Lyon: rainy.", "Nice: windy.")
START = 1_700_000_000_000_000_000


def exchange(number: int) -> Exchange:
    """Request ``number`` (0-based) of the chain through the proxy: it continues the one before."""
    request = {"model": "gpt-5.6", "instructions": INSTRUCTIONS, "input": QUESTIONS[number]}
    if number:
        request["previous_response_id"] = f"resp_{number}"
    usage = responses_usage(900 + 40 * number, 12, cached_tokens=896 if number else 0)
    reply = responses_reply(id=f"resp_{number + 1}", model="gpt-5.6", usage=usage, text=ANSWERS[number])
    return Exchange(
        route="openai",
        method="POST",
        path="/v1/responses",
        request_headers={},
        request_body=json.dumps(request).encode(),
        status=200,
        response_headers={"content-type": "application/json"},
        response_body=json.dumps(reply.body).encode(),
        start_ns=START + number * 10**9,
        end_ns=START + number * 10**9 + 5 * 10**8,
    )


SPANS = [to_readable(span_of(exchange(number), {"ctxview.run.id": "trip"})) for number in range(3)]


def send(send_as, key, *numbers: int) -> None:
    send_as(key, encode_spans([SPANS[number] for number in numbers]))


def windows(client, key) -> list[dict]:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    [run] = client.get("/api/v1/runs", **headers).json()["runs"]
    calls = client.get(f"/api/v1/runs/{run['id']}/calls", **headers).json()["calls"]
    return [
        client.get(f"/api/v1/calls/{call['id']}?content=1", **headers).json()
        for call in sorted(calls, key=lambda call: call["seq"])
    ]


def said(call: dict) -> list[tuple[str, str]]:
    """(role, text) of each item: the instructions are a system part of the proxy's span."""
    shown = []
    for item in call["items"]:
        content = item["content"]
        shown.append(
            ("system", content)
            if item["kind"] == "system" and item["id"].startswith("system:")
            else (
                item["role"],
                json.loads(content)["parts"][0]["content"],
            )
        )
    return shown


WHOLE = [
    ("system", INSTRUCTIONS),
    ("user", QUESTIONS[0]),
    ("assistant", ANSWERS[0]),
    ("user", QUESTIONS[1]),
    ("assistant", ANSWERS[1]),
    ("user", QUESTIONS[2]),
]


def test_the_proxys_continued_requests_are_rebuilt_across_traces(send_as, client, key):
    send(send_as, key, 0, 1, 2)
    first, second, third = windows(client, key)
    assert said(second) == WHOLE[:4]
    assert said(third) == WHOLE
    assert [item["id"] for item in third["items"][:4]] == [item["id"] for item in second["items"]]
    assert any(
        f"rebuilt from the call that answered it (span {second['span_id']})" in note
        for note in third["notes"]
    )
    assert [call["cache"]["cause"] for call in (first, second, third)] == [None, None, None]


def test_calls_stored_before_the_calls_they_continue_wait_for_the_whole_chain(send_as, client, key):
    send(send_as, key, 2)
    send(send_as, key, 1)
    # Call 2 came, but the chain still lacks resp_1: both keep what they sent and wait for it.
    assert dict(Call.objects.values_list("response_id", "window_gap")) == {
        "resp_2": "resp_1",
        "resp_3": "resp_1",
    }
    second, third = windows(client, key)
    assert (said(second), said(third)) == ([WHOLE[0], WHOLE[3]], [WHOLE[0], WHOLE[5]])
    send(send_as, key, 0)
    first, second, third = windows(client, key)
    assert said(second) == WHOLE[:4]
    assert said(third) == WHOLE
    assert set(Call.objects.values_list("window_gap", flat=True)) == {""}
    assert [call["cache"]["cause"] for call in (first, second, third)] == [None, None, None]
    assert [call["seq"] for call in (first, second, third)] == [1, 2, 3]


def test_a_span_sent_again_rebuilds_nothing_twice(send_as, client, key):
    send(send_as, key, 1)
    send(send_as, key, 0)
    send(send_as, key, 0, 1)
    first, second = windows(client, key)
    assert said(second) == WHOLE[:4]
    assert Call.objects.count() == 2
