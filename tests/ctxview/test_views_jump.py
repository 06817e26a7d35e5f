"""The jump box: a run by key from any page; a call, a turn or an item of the run whose page it is on."""

import pytest

from ctxview.params import jump_target
from ingest.models import Run
from tests.ctxview import ui_fixtures

inspect = ui_fixtures.inspect
stranger_client = ui_fixtures.stranger_client
viewer_client = ui_fixtures.viewer_client


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("#57", ("call", 57)),
        ("call 3", ("call", 3)),
        ("Turn 40", ("turn", 40)),
        ("fact:affected-shard", ("name", "fact:affected-shard")),
        (" demo-run ", ("name", "demo-run")),
        ("#x", ("name", "#x")),
    ],
)
def test_what_the_jump_box_names(text, target):
    assert jump_target(text) == target


def test_a_run_key_a_call_a_turn_and_an_item(viewer_client, inspect):
    run = inspect.incident
    call = run.calls.get(seq=5)
    cases = {
        inspect.migration.key: f"/runs/{inspect.migration.id}/",
        "#5": f"/calls/{call.id}/",
        "turn 40": f"/runs/{run.id}/explain?turn=40",
        "fact:affected-shard": f"/runs/{run.id}/item?id=fact%3Aaffected-shard",
    }
    for text, url in cases.items():
        response = viewer_client.get("/jump", {"q": text, "run": run.id})
        assert (response.status_code, response["Location"]) == (302, url), text


def test_htmx_fetches_the_page_into_the_page_region(viewer_client, inspect):
    run = inspect.incident
    response = viewer_client.get(
        "/jump", {"q": "#5", "run": run.id}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="page"
    )
    assert response.status_code == 200
    assert response["HX-Location"] == f'{{"path": "/calls/{run.calls.get(seq=5).id}/", "target": "#page"}}'


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"q": ""}, "type what to jump to"),
        ({"q": "#5"}, "names a call of a run: jump from one of the run"),
        ({"q": "call 999", "run": "RUN"}, "has no call 999: its calls are 1 to"),
        ({"q": "turn 0", "run": "RUN"}, "has no turn 0"),
        ({"q": "x" * 501}, "q must be at most 500 characters"),
        ({"q": "#5", "run": "abc"}, "run must be a whole number"),
    ],
)
def test_what_cannot_be_jumped_to_is_a_400_that_says_why(viewer_client, inspect, query, message):
    query = {name: str(inspect.incident.id) if value == "RUN" else value for name, value in query.items()}
    response = viewer_client.get("/jump", query)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_a_name_that_matches_nothing_exactly_is_a_page_of_matches_in_the_layout(viewer_client, inspect):
    none = viewer_client.get("/jump", {"q": "no-such-thing", "run": inspect.incident.id})
    assert none.status_code == 200
    body = none.content.decode()
    assert "Nothing is called “no-such-thing”" in body and 'id="jump-q"' in body  # the normal layout
    assert "No run's key or title holds “no-such-thing” either" in body
    several = viewer_client.get("/jump", {"q": "DEMO-"}).content.decode()  # a part of several keys
    for run in inspect.runs.values():
        assert (f">{run.key}<" in several) == ("demo-" in run.key.lower())


def test_a_part_of_one_runs_key_goes_straight_there(viewer_client, inspect):
    response = viewer_client.get("/jump", {"q": "incident-turn"})
    assert (response.status_code, response["Location"]) == (302, f"/runs/{inspect.incident.id}/")


def test_another_projects_run_is_neither_found_nor_a_context(stranger_client, inspect):
    response = stranger_client.get("/jump", {"q": inspect.incident.key})
    assert response.status_code == 200 and f"/runs/{inspect.incident.id}/" not in response.content.decode()
    response = stranger_client.get("/jump", {"q": "#5", "run": inspect.incident.id})
    assert response.status_code == 404


def test_every_page_carries_the_jump_box_with_its_run(viewer_client, inspect):
    run = inspect.incident
    body = viewer_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="jump-q"' in body and f'name="run" value="{run.id}"' in body
    assert 'id="jump-q"' in viewer_client.get("/").content.decode()


def test_words_of_a_runs_title_find_it(viewer_client, inspect):
    run = Run.objects.get(pk=inspect.incident.pk)
    assert run.title  # the first user message, shortened
    words = run.title.split()[1:4]  # a few words from inside it, as someone remembers the session
    response = viewer_client.get("/jump", {"q": " ".join(words).upper()})
    assert response.status_code in (200, 302)
    if response.status_code == 302:
        assert response["Location"] == f"/runs/{run.id}/"
    else:
        assert f"/runs/{run.id}/" in response.content.decode()  # one of the runs whose title holds them
