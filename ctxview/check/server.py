"""Runs read from a ctxview server through its read API (``GET /api/v1/runs/{id}``, ``/calls``,
``/findings``), in the shape the check's engine gives them. No Django here.

The token (a personal API token or the project's ingest key) is sent only to the server named: the
API's ``next`` links are followed by their path and query, on that server, and a redirect is refused
(``ctxview.token_requests``).
"""

import json
import urllib.error
import urllib.parse
import urllib.request

from ctxview import token_requests
from ctxview.check.inputs import Unusable

TIMEOUT = 30.0
PAGE = 500


class Server:
    def __init__(self, url: str, token: str | None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise Unusable(f"--server {url!r}: an http:// or https:// URL is expected")
        self.base = url.rstrip("/")
        self.token = token

    def get(self, path: str) -> dict:
        """The JSON of ``path`` (with its query) on this server."""
        request = urllib.request.Request(self.base + path, headers={"Accept": "application/json"})
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with token_requests.urlopen(request, timeout=TIMEOUT) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if redirect := token_requests.redirect_of(exc):
                raise Unusable(f"{self.base}{path}: {redirect}") from None
            raise Unusable(f"{self.base}{path}: the server answered {exc.code} ({_error_of(exc)})") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unusable(f"{self.base}{path}: the server cannot be reached ({reason})") from None
        try:
            answer = json.loads(body)
        except ValueError:
            raise Unusable(f"{self.base}{path}: the answer is not JSON (is this a ctxview server?)") from None
        if not isinstance(answer, dict):
            raise Unusable(f"{self.base}{path}: the answer is not a JSON object (is this a ctxview server?)")
        return answer

    def pages(self, path: str, key: str) -> list[dict]:
        """Every entry under ``key`` of a paged list, following its ``next`` links."""
        entries: list[dict] = []
        while path:
            page = self.get(path)
            entries += page.get(key) or []
            following = page.get("next")
            path = _path_of(following) if following else ""
        return entries

    def run(self, run_id: int) -> dict:
        """One run, its calls and its findings, once the server has analysed all its calls."""
        run = self.get(f"/api/v1/runs/{run_id}")
        if "key" not in run:
            raise Unusable(
                f"{self.base}/api/v1/runs/{run_id}: the answer is not a run (is this a ctxview server?)"
            )
        if (run.get("analysed_calls") or 0) < (run.get("calls") or 0):
            raise Unusable(
                f"{self.base}: run {run_id} is still being analysed ({run.get('analysed_calls')} of "
                f"{run.get('calls')} calls); check it again once the server has caught up"
            )
        return {
            "run": run,
            "calls": self.pages(f"/api/v1/runs/{run_id}/calls?limit={PAGE}", "calls"),
            "findings": self.get(f"/api/v1/runs/{run_id}/findings").get("findings") or [],
        }

    def labelled(self, label: str) -> list[int]:
        """The ids of the runs with ``label``, newest first."""
        query = urllib.parse.urlencode({"label": label, "limit": PAGE})
        return [run["id"] for run in self.pages(f"/api/v1/runs?{query}", "runs")]


def _path_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _error_of(exc: urllib.error.HTTPError) -> str:
    try:
        return json.loads(exc.read()).get("error") or exc.reason
    except (ValueError, AttributeError, OSError):
        return str(exc.reason)


def read_runs(url: str, token: str | None, run_ids: list[int], labels: list[str]) -> list[dict]:
    """The runs named by id and by label (a run named twice is read once)."""
    server = Server(url, token)
    ids = list(run_ids)
    for label in labels:
        found = server.labelled(label)
        if not found:
            raise Unusable(f"{url}: no run is labelled {label!r}")
        ids += found
    return [server.run(run_id) for run_id in dict.fromkeys(ids)]
