"""A command that sends a token to a ctxview server (``ctxview check --server``, the demo's sender) never
follows a redirect: the token must not reach a host the user did not name."""

import urllib.error

import pytest

from ctxview.cli import main
from ctxview.demo import cli as demo_cli
from tests.redirects import redirecting_elsewhere, serving

TOKEN = "cvk_must_stay_home"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_check_server_refuses_a_redirect_and_says_where_it_pointed(status, capsys):
    with redirecting_elsewhere(status) as (url, elsewhere, received):
        code = main(["check", "--server", url, "--token", TOKEN, "--run", "7"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"ctxview check: {url}/api/v1/runs/7: the server answered {status}, a redirect to "
        f"{elsewhere}/api/v1/runs/7; the token is not sent on after a redirect, so give the final URL\n"
    )
    assert received == []


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_demo_sender_refuses_a_redirect(status):
    with redirecting_elsewhere(status) as (url, _, received):
        with pytest.raises(urllib.error.HTTPError) as raised:
            demo_cli.send(url, TOKEN)
    assert raised.value.code == status
    assert received == []


def test_without_a_redirect_the_token_reaches_the_server_named(capsys):
    """The control: the same request, answered in place, carries the token (the answer is no run)."""
    with serving(lambda path: (200, {"Content-Type": "application/json"})) as (url, received):
        assert main(["check", "--server", url, "--token", TOKEN, "--run", "7"]) == 2
    assert capsys.readouterr().err == (
        f"ctxview check: {url}/api/v1/runs/7: the answer is not a run (is this a ctxview server?)\n"
    )
    assert [request["Authorization"] for request in received] == [f"Bearer {TOKEN}"]


def test_an_answer_that_is_json_but_no_object_is_a_clear_error(capsys):
    with serving(lambda path: (200, {"Content-Type": "application/json"}, b"[1, 2]")) as (url, _):
        assert main(["check", "--server", url, "--token", TOKEN, "--label", "nightly"]) == 2
    assert capsys.readouterr().err == (
        f"ctxview check: {url}/api/v1/runs?label=nightly&limit=500: the answer is not a JSON object (is this "
        "a ctxview server?)\n"
    )
