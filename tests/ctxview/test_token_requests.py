"""A command that sends a token to a ctxview server (``ctxview check --server``, the demo's sender) never
follows a redirect: the token must not reach a host the user did not name."""

import threading
import urllib.error
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxview.cli import main
from ctxview.demo import cli as demo_cli

TOKEN = "cvk_must_stay_home"


@contextmanager
def serving(answer) -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP server answering every request with ``answer(path) -> (status, headers)``;
    yields its URL and the headers of each request it received."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            received.append(dict(self.headers))
            status, headers = answer(self.path)
            self.send_response(status)
            for name, value in {**headers, "Content-Length": "2"}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def redirecting(status: int) -> Iterator[tuple[str, str, list[dict]]]:
    """A server that redirects everything (``status``) to a second one; yields the first's URL, the
    second's, and what the second received."""
    with serving(lambda path: (200, {"Content-Type": "application/json"})) as (elsewhere, received):
        with serving(lambda path: (status, {"Location": f"{elsewhere}{path}"})) as (url, asked):
            yield url, elsewhere, received
            assert asked, "the redirecting server was never asked: the test tested nothing"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_check_server_refuses_a_redirect_and_says_where_it_pointed(status, capsys):
    with redirecting(status) as (url, elsewhere, received):
        code = main(["check", "--server", url, "--token", TOKEN, "--run", "7"])
    assert code == 2
    assert capsys.readouterr().err == (
        f"ctxview check: {url}/api/v1/runs/7: the server answered {status}, a redirect to "
        f"{elsewhere}/api/v1/runs/7; the token is not sent on after a redirect, so give the final URL\n"
    )
    assert received == []


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_demo_sender_refuses_a_redirect(status):
    with redirecting(status) as (url, _, received):
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
