"""The runs search is one query (``ctxview.search.search_runs``): the runs page and the API, given the same
filters, list the same runs in the same order."""

from urllib.parse import quote

import pytest

from ctxview.models import Label
from tests.ctxview import ui_fixtures
from tests.ctxview.ui_data import HOSTILE_RUN

inspect = ui_fixtures.inspect
viewer_client = ui_fixtures.viewer_client

PAGE = "/projects/inspect/runs/"


def on_page(client, query: str) -> list[str]:
    response = client.get(f"{PAGE}?{query}")
    assert response.status_code == 200, response.content[:300]
    return [run.key for run in response.context["runs"]]


def in_api(client, query: str) -> list[str]:
    response = client.get(f"/api/v1/runs?project=inspect&{query}")
    assert response.status_code == 200, response.content[:300]
    return [run["key"] for run in response.json()["runs"]]


def same_on_both(client, query: str) -> list[str]:
    page, api = on_page(client, query), in_api(client, query)
    assert page == api, query
    return page


@pytest.mark.parametrize(
    "query, expected",
    [
        (
            "",
            [
                HOSTILE_RUN,
                "demo-research-brief",
                "demo-order-service-timeout",
                "demo-migration-200-files",
                "demo-incident-turn-40",
            ],
        ),
        ("service=oncall-agent", ["demo-incident-turn-40"]),
        # Values are trimmed on both (the API used to look for " oncall-agent " and find nothing).
        ("service=%20oncall-agent%20", ["demo-incident-turn-40"]),
        ("finding=superseded_included", ["demo-order-service-timeout"]),
        ("finding=fact_dropped&model=claude-sonnet-4-5", ["demo-incident-turn-40"]),
        ("source=src/api/billing.ts&version=v1", ["demo-migration-200-files"]),
        ("source=src/api/billing.ts&version=v9", []),
        ("source=progress.md&service=migration-agent", ["demo-migration-200-files"]),
        ("item=fact:affected-shard", ["demo-incident-turn-40"]),
        ("item=tool%3Anothing-has-this", []),
        ("since=2026-11-25T00:00:00Z&until=2026-11-26T00:00:00Z", ["demo-migration-200-files"]),
        ("since=2030-01-01T00:00:00Z", []),
    ],
)
def test_the_page_and_the_api_find_the_same_runs(viewer_client, inspect, query, expected):
    assert same_on_both(viewer_client, query) == expected


def test_until_excludes_its_instant_on_both(viewer_client, inspect):
    started = inspect.migration.started_at.isoformat()
    assert inspect.migration.key not in same_on_both(viewer_client, f"until={quote(started)}")
    assert inspect.migration.key in same_on_both(viewer_client, f"since={quote(started)}")


def test_labels_and_content_hashes_are_found_alike(viewer_client, inspect):
    Label.objects.create(project=inspect.project, run=inspect.timeout, name="postmortem", link="")
    assert same_on_both(viewer_client, "label=PostMortem%20") == ["demo-order-service-timeout"]
    item = inspect.timeout.calls.get(seq=1).items[0]
    assert same_on_both(viewer_client, f"hash={item['hash']}&label=postmortem") == [
        "demo-order-service-timeout"
    ]


def test_a_model_is_the_request_or_the_response_model_of_a_call(viewer_client, inspect):
    """A run's stored model names keep one model per call (the response's); the search asks the calls."""
    inspect.timeout.calls.filter(seq=2).update(request_model="sonnet-latest")
    assert in_api(viewer_client, "model=sonnet-latest") == ["demo-order-service-timeout"]
    response_model = inspect.timeout.calls.get(seq=2).response_model
    assert "demo-order-service-timeout" in same_on_both(viewer_client, f"model={response_model}")


def test_an_item_value_over_500_characters_is_refused_on_both(viewer_client, inspect):
    query = "source=" + "x" * 501
    assert viewer_client.get(f"{PAGE}?{query}").status_code == 400
    response = viewer_client.get(f"/api/v1/runs?{query}")
    assert response.status_code == 400
    assert response.json() == {"error": "source is longer than 500 characters"}


def test_a_far_offset_or_the_last_day_is_no_server_error_on_both(viewer_client, inspect):
    for query in ("since=2000-01-01T00:00:00%2B20:00", "until=9999-12-31T23:00:00-05:00"):
        assert len(same_on_both(viewer_client, query)) == 5, query
