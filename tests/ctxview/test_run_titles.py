"""A run's title beside its key on the runs list, on the run's page and in the breadcrumbs, escaped."""

import pytest
from django.utils.html import escape
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ingest.models import Run
from tests import factories
from tests.factories import user_message
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)

HOSTILE = '<script>alert("t")</script> & "why" is <b>pay-shard-7</b> slow?'
ESCAPED = escape(HOSTILE)
KEY = "conversation-4711"
CRUMB = escape(HOSTILE[:59]) + "…"  # a crumb is cut at 60 characters
assert "&lt;script&gt;alert(&quot;t&quot;)" in ESCAPED


@pytest.fixture
def titled(send, client, alice):  # noqa: F811
    for number in (1, 2):
        request = ExportTraceServiceRequest()
        factories.chat_span(
            request,
            trace_id=bytes(range(1, 17)),
            number=number,
            messages=[user_message(HOSTILE)],
            attributes={"gen_ai.conversation.id": KEY, "gen_ai.usage.input_tokens": 100},
        )
        send(request)
    client.force_login(alice)
    run = Run.objects.get()
    assert run.title == HOSTILE
    return run


def page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def crumbs(html: str) -> str:
    start = html.index('<nav class="crumbs">')
    return html[start : html.index("</nav>", start)]


def test_the_runs_list_shows_the_title_beside_the_key(client, titled):
    html = page(client, "/projects/alpha/runs/")
    row = html[html.index('<td class="run-name">') :]
    row = row[: row.index("</td>")]
    # The title and the key beside it, both the link to the run.
    key = f'<code class="small muted" title="{KEY}">{KEY}</code>'
    assert f'hx-target="#page">{ESCAPED}\n        {key}</a>' in row
    assert "<script>alert" not in html and "<b>pay-shard-7" not in html


def test_the_run_page_heads_with_the_title_and_its_crumb_is_the_title(client, titled):
    html = page(client, f"/runs/{titled.id}/")
    assert f'<h1 class="run-title">{ESCAPED} <code>{KEY}</code>' in html
    assert f'<span title="Run {KEY}">{CRUMB}</span>' in crumbs(html)
    assert "<script>alert" not in html


@pytest.mark.parametrize(
    "path",
    ["review", "compare?a=1&b=2", "explain?turn=1", "item?id={item}"],
)
def test_the_run_pages_crumbs_name_the_run_by_its_title(client, titled, path):
    item = titled.calls.get(seq=1).items[0]["id"]
    html = page(client, f"/runs/{titled.id}/" + path.format(item=item))
    link = f'<a href="/runs/{titled.id}/" title="Run {KEY}">{CRUMB}</a>'
    assert link in crumbs(html), path
    assert "<script>alert" not in html


def test_the_jump_pages_crumb_names_the_run_by_its_title(client, titled):
    html = page(client, f"/jump?q=nothing-like-it&run={titled.id}")
    assert f'title="Run {KEY}">{CRUMB}</a>' in crumbs(html)


def test_a_run_without_a_title_is_named_by_its_key(client, alice, project):
    run = Run.objects.create(project=project, key="trace-0123", key_source="trace_id")
    client.force_login(alice)
    html = page(client, f"/runs/{run.id}/")
    assert '<h1 class="run-title">Run <code>trace-0123</code>' in html
    assert '<span title="Run trace-0123">trace-0123</span>' in crumbs(html)
    review = page(client, f"/runs/{run.id}/review")
    assert f'<a href="/runs/{run.id}/" title="Run trace-0123">trace-0123</a>' in crumbs(review)
