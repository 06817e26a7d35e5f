"""Re-ask a replay's query call: each policy's window at it, sent to the project's configured endpoint
with each phrasing of a question, the answers scored (``ctxcore.replay.reask``).

Nothing is sent unless an admin configured the project's endpoint and the request gives a question and
an expected pattern. The pattern is compiled with RE2 as the redaction patterns are (linear time over a
model's answer). Every failure is a sentence for the page, never an exception out of here.
"""

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import re2

from ctxcore.replay.policies import Slot
from ctxcore.replay.reask import ReaskError, answer_text, conversation, phrasings, request, score, tally
from ctxview.access import has_role
from ctxview.models import ReaskEndpoint
from ingest.models import Content, Membership, Project
from ingest.redact import _re2_error

NOT_CONFIGURED = (
    "re-ask is off for this project: an admin sets a model endpoint (provider, base URL, key, model) "
    "on the project's settings page"
)
TIMEOUT_SECONDS = 30  # one answer
# All the answers of one request: policies x phrasings could otherwise hold a page for many minutes.
TOTAL_SECONDS = 90
MAX_RESPONSE_BYTES = 1_000_000
MAX_EXPECTED = 500


@dataclass(frozen=True)
class Question:
    """What to ask a replayed window and what a right answer holds."""

    phrasings: tuple[str, ...]
    expected: "re2._Regexp"
    expected_text: str


def question_from(asks: Sequence[str], expect: str | None) -> Question | None:
    """The question of a request (``ask`` values, ``expect``); None when it asks nothing; ReaskError
    when it is incomplete or too big, or RE2 refuses the pattern."""
    asks = [value for value in asks if value.strip()]
    expect = (expect or "").strip()
    if not asks and not expect:
        return None
    if not expect:
        raise ReaskError("expect must give the pattern a right answer holds")
    if len(expect) > MAX_EXPECTED:
        raise ReaskError(f"expect is longer than {MAX_EXPECTED} characters")
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False
    try:
        expected = re2.compile(expect, options)
    except re2.error as exc:
        raise ReaskError(
            f"expect: {_re2_error(exc)} (RE2 syntax: no look-around, no back-references)"
        ) from None
    return Question(tuple(phrasings(asks)), expected, expect)


NEEDS_EDITOR = "re-ask spends the project's tokens: asking needs the editor role in this project"


def endpoint_of(project: Project) -> ReaskEndpoint | None:
    return ReaskEndpoint.objects.filter(project=project).first()


def endpoint_for(user, project: Project) -> tuple[ReaskEndpoint | None, str]:
    """The endpoint ``user`` may re-ask through, or None and why not: a question costs the project tokens,
    so a viewer or an ingest key (no logged-in user) reads the replay but sends nothing."""
    endpoint = endpoint_of(project)
    if endpoint is None:
        return None, NOT_CONFIGURED
    if not (user.is_authenticated and has_role(user, project, Membership.Role.EDITOR)):
        return None, NEEDS_EDITOR
    return endpoint, ""


def _post(url: str, headers: dict[str, str], body: bytes, deadline: float) -> object:
    left = min(TIMEOUT_SECONDS, deadline - time.monotonic())
    if left <= 0:
        raise ReaskError(f"out of time: a re-ask gets {TOTAL_SECONDS} seconds for all its answers")
    call = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(call, timeout=left) as response:
            data = response.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read(300).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException):
            detail = "(no body)"
        raise ReaskError(f"the endpoint answered HTTP {exc.code}: {detail}") from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        raise ReaskError(f"the endpoint could not be reached: {getattr(exc, 'reason', exc)}") from None
    if len(data) > MAX_RESPONSE_BYTES:
        raise ReaskError(f"the endpoint's answer is longer than {MAX_RESPONSE_BYTES:,} bytes")
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise ReaskError("the endpoint's answer is not JSON") from None


def _contents(project: Project, window: Sequence[Slot]) -> dict[str, str]:
    hashes = {slot.item.hash for slot in window}
    return dict(Content.objects.by_hash(project.id, hashes, "text"))


def reask_window(
    endpoint: ReaskEndpoint, window: Sequence[Slot], question: Question, deadline: float
) -> dict:
    """One policy's re-ask: ``{"reask": {"right", "wrong", "unknown"} | None, "answers": [...],
    "reason": str | None}`` (None with the reason when the window cannot be sent or the endpoint fails)."""
    try:
        system, messages = conversation(window, _contents(endpoint.project, window))
        answers = []
        for phrasing in question.phrasings:
            url, headers, body = request(
                endpoint.provider,
                endpoint.base_url,
                endpoint.model,
                endpoint.api_key,
                system,
                messages,
                phrasing,
            )
            text = answer_text(endpoint.provider, _post(url, headers, body, deadline))
            answers.append({"ask": phrasing, "answer": text, "score": score(text, question.expected)})
    except ReaskError as exc:
        return {"reask": None, "answers": [], "reason": str(exc)}
    return {"reask": tally([entry["score"] for entry in answers]), "answers": answers, "reason": None}


def reask_replay(endpoint: ReaskEndpoint, result: dict, question: Question) -> dict[str, dict]:
    """Each policy of a replay (made keeping the query call's window) re-asked, by policy spec."""
    seq, deadline = result["query_seq"], time.monotonic() + TOTAL_SECONDS
    return {
        entry["policy"]: reask_window(endpoint, entry["windows"].get(seq, []), question, deadline)
        for entry in result["policies"]
    }
