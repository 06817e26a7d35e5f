"""Requests that carry a secret (an API token or an ingest key) from a command a user runs (``ctxview check
--server``, the demo's sender) to a ctxview server. No Django here.

A redirect is never followed: urllib would send the request's ``Authorization`` header on to whatever host
the ``Location`` names. A redirect is answered as the error it then is, naming where it pointed, so the
user can give the final URL instead.
"""

import urllib.error
import urllib.request


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises the 3xx as an HTTPError


_OPENER = urllib.request.build_opener(_RefuseRedirects)


def urlopen(request: urllib.request.Request, timeout: float):
    """``urllib.request.urlopen`` for ``request``, with redirects raised as ``HTTPError``."""
    return _OPENER.open(request, timeout=timeout)


def redirect_of(exc: urllib.error.HTTPError) -> str | None:
    """Why a refused redirect was refused, in words for the user; None when ``exc`` is no redirect."""
    if not 300 <= exc.code < 400:
        return None
    location = exc.headers.get("Location") if exc.headers else None
    return (
        f"the server answered {exc.code}, a redirect to {location or 'nowhere named'}; the token is not sent "
        "on after a redirect, so give the final URL"
    )
