"""Loopback HTTP servers that answer in place or redirect: for the clients that must not follow a redirect
with a secret (``ctxview.token_requests``, the proxy's sender)."""

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serving(answer: Callable[[str], tuple]) -> Iterator[tuple[str, list[dict]]]:
    """A loopback HTTP server answering every request with ``answer(path) -> (status, headers[, body])``
    (the body ``{}`` unless given); yields its URL and the headers of each request it received."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            received.append(dict(self.headers))
            status, headers, *body = answer(self.path)
            body = body[0] if body else b"{}"
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

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
def redirecting(status: int, to: str) -> Iterator[str]:
    """A server that redirects every request (``status``) to the same path on ``to``; yields its URL, and
    fails the test if it was never asked (the test would have tested nothing)."""
    with serving(lambda path: (status, {"Location": f"{to}{path}"})) as (url, asked):
        yield url
    assert asked, "the redirecting server was never asked"


@contextmanager
def redirecting_elsewhere(status: int) -> Iterator[tuple[str, str, list[dict]]]:
    """A server that redirects everything (``status``) to a second one answering ``{}``; yields the first's
    URL, the second's, and the headers of each request the second received."""
    with serving(lambda path: (200, {"Content-Type": "application/json"})) as (elsewhere, received):
        with redirecting(status, elsewhere) as url:
            yield url, elsewhere, received
