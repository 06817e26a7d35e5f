"""A run's title: the first user message of its first call, whatever order the calls arrive in."""

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest import redact, titles
from ingest.models import Content, Run
from ingest.rendering import render
from tests import factories
from tests.factories import assistant_message, kv, user_message
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

TRACE = bytes(range(1, 17))
OTHER_TRACE = bytes(range(2, 18))
ROOT = (99).to_bytes(8, "big")


# --- Shortening and reading a message (no database) ----------------------------------------------


def test_a_short_text_is_the_title_as_it_is():
    assert titles.shorten("Why is pay-shard-7 slow?") == "Why is pay-shard-7 slow?"


def test_a_title_is_one_line_of_at_most_80_characters_ending_in_an_ellipsis():
    text = "Read the incident notes\n\nand tell me\twhy the deploy window moved " + "again " * 30
    title = titles.shorten(text)
    assert "\n" not in title and "\t" not in title and "  " not in title
    assert len(title) <= 80 and title.endswith("…")
    assert title.startswith("Read the incident notes and tell me why the deploy window moved again")
    assert not title[:-1].endswith(" ")  # cut at a word, not after a space


def test_a_title_with_no_space_near_the_limit_is_cut_at_the_limit():
    assert titles.shorten("x" * 200) == "x" * 79 + "…"


def test_control_and_direction_characters_are_dropped():
    assert titles.shorten("pay\x00ment \u202eevil\u202c done\x07") == "payment evil done"


def test_the_text_of_a_rendered_message_is_its_text_parts():
    message = {
        "role": "user",
        "parts": [
            {"type": "text", "content": "Look at"},
            {"type": "blob", "modality": "image", "content": "aGVsbG8="},
            {"type": "text", "content": "this chart"},
        ],
    }
    assert titles.message_text(render(message)) == "Look at this chart"


def test_a_cut_rendered_message_gives_the_start_of_its_first_text():
    text = render(user_message('Why did "pay-shard-7" fail?\n' + '"é' * 3000))  # \"é: an escape each
    for cut in range(4090, 4097):  # some inside an escape
        assert titles.message_text(text[:cut]).startswith('Why did "pay-shard-7" fail?\n"é"é')


def test_a_cut_inside_an_escape_drops_the_escape():
    text = render(user_message("tab\there"))  # ...tab\\there
    assert titles.message_text(text[: text.index("\\t") + 1]) == "tab"


def test_a_senders_plain_text_item_is_its_own_text():
    assert titles.message_text("Summarise the ticket") == "Summarise the ticket"


def test_a_message_of_tool_results_only_has_no_text():
    message = {"role": "user", "parts": [{"type": "tool_call_response", "id": "t1", "response": "ok"}]}
    assert titles.message_text(render(message)) == ""


# --- Through the receiver and the batch task -----------------------------------------------------


def call_request(number: int, messages=None, trace: bytes = TRACE, parent: bytes = b"", **attributes):
    request = ExportTraceServiceRequest()
    factories.chat_span(
        request,
        trace_id=trace,
        number=number,
        messages=messages,
        parent=parent,
        attributes={"gen_ai.conversation.id": "conv-1", "gen_ai.usage.input_tokens": 100, **attributes},
    )
    return request


def root_span(request: ExportTraceServiceRequest, name: str, trace: bytes = TRACE) -> None:
    span = request.resource_spans[0].scope_spans[0].spans.add()
    span.trace_id, span.span_id, span.name, span.kind = trace, ROOT, name, 1
    span.start_time_unix_nano = 1_700_000_000_000_000_000
    span.end_time_unix_nano = 1_700_000_100_000_000_000
    span.attributes.append(kv("app.kind", "request handler"))


@pytest.mark.django_db
def test_the_title_is_the_first_user_message_of_the_first_call(send):  # noqa: F811
    first = [
        user_message("What is  the\nweather in Paris?"),
        assistant_message("Sunny."),
        user_message("And Rome?"),
    ]
    send(call_request(1, first))
    send(call_request(2, [*first, assistant_message("Rainy."), user_message("Thanks")]))
    assert Run.objects.get().title == "What is the weather in Paris?"


@pytest.mark.django_db
def test_a_first_call_that_arrives_last_gives_the_title(send):  # noqa: F811
    send(call_request(3, [user_message("third question")]))
    send(call_request(2, [user_message("second question")]))
    assert Run.objects.get().title == "second question"
    send(call_request(1, [user_message("first question")]))
    run = Run.objects.get()
    assert run.title == "first question"
    assert list(run.calls.order_by("seq").values_list("seq", "start_ns")) == sorted(
        run.calls.values_list("seq", "start_ns"), key=lambda row: row[1]
    )


@pytest.mark.django_db
def test_user_messages_of_tool_results_only_are_passed_over(send):  # noqa: F811
    results = {"role": "user", "parts": [{"type": "tool_call_response", "id": "t1", "response": "p99 4s"}]}
    send(call_request(1, [results, user_message("Is it healthy?")]))
    assert Run.objects.get().title == "Is it healthy?"


@pytest.mark.django_db
def test_the_content_a_project_masks_is_masked_in_the_title(send):  # noqa: F811
    send(call_request(1, [user_message("Mail ops@example.com about the outage")]))
    assert Run.objects.get().title == "Mail [REDACTED:email] about the outage"


@pytest.mark.django_db
def test_a_message_the_project_masked_whole_is_passed_over(send):  # noqa: F811
    send(call_request(1, [user_message(" ops@example.com "), user_message("Why is it down?")]))
    assert Run.objects.get().title == "Why is it down?"


def test_only_masks_is_a_text_with_nothing_left_but_masks():
    assert redact.only_masks("[REDACTED:email] [REDACTED:api_key]\n")
    assert not redact.only_masks("Mail [REDACTED:email]")
    assert not redact.only_masks("") and not redact.only_masks("[REDACTED:email")


@pytest.mark.django_db
def test_a_hash_only_project_takes_no_title_from_content(send, project):  # noqa: F811
    project.hash_only = True
    project.save()
    request = call_request(1, [user_message("secret plans for the merger")], parent=ROOT)
    root_span(request, "POST /support/ask")
    send(request)
    run = Run.objects.get()
    assert run.title == "POST /support/ask"
    assert not Content.objects.exists()


@pytest.mark.django_db
def test_without_content_a_root_span_that_arrives_after_the_calls_names_the_run(send):  # noqa: F811
    send(call_request(1, parent=ROOT))
    send(call_request(2, parent=ROOT))
    assert Run.objects.get().title == ""  # the root span ends, and so arrives, last
    request = ExportTraceServiceRequest()
    request.resource_spans.add().resource.attributes.append(kv("service.name", "agent"))
    request.resource_spans[0].scope_spans.add()
    root_span(request, "handle ticket 4711")
    send(request)
    run = Run.objects.get()
    assert (run.title, run.call_count) == ("handle ticket 4711", 2)


@pytest.mark.django_db
def test_a_call_without_a_parent_is_its_own_root(send):  # noqa: F811
    send(call_request(1))
    assert Run.objects.get().title == "chat model"


@pytest.mark.django_db
def test_a_root_span_of_another_trace_than_the_first_calls_changes_nothing(send):  # noqa: F811
    send(call_request(1, [user_message("first question")]))
    request = call_request(2, [user_message("first question")], trace=OTHER_TRACE, parent=ROOT)
    root_span(request, "second turn", trace=OTHER_TRACE)
    send(request)
    assert Run.objects.get().title == "first question"
