"""Re-ask a replay's query call: each policy's window at it, sent to the project's configured endpoint
with each phrasing of a question, the answers scored (``ctxcore.replay.reask``).

Nothing is sent unless an admin configured the project's endpoint and the request gives a question and
an expected pattern. The pattern is compiled with RE2 as the redaction patterns are (linear time over a
model's answer). Every failure is a sentence for the page, never an exception out of here.
"""

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import re2
from django.conf import settings

from ctxcore.replay.policies import Slot
from ctxcore.replay.reask import ReaskError, answer_text, conversation, phrasings, request, score, tally
from ctxview import outbound, sealing
from ctxview.access import has_role, outbound_off
from ctxview.models import ReaskEndpoint
from ingest.models import Content, Membership, Project
from ingest.redact import PatternError, compile_own

NOT_CONFIGURED = (
    "re-ask is off for this project: an admin sets a model endpoint (provider, base URL, key, model) "
    "on the project's settings page"
)
TIMEOUT_SECONDS = 30  # the longest wait for any one read of an answer
# All the answers of one request share CTXVIEW_REASK_DEADLINE_SECONDS: policies x phrasings could
# otherwise hold a page for many minutes.
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
    try:
        expected = compile_own(expect, "expect", case_sensitive=False)
    except PatternError as exc:
        raise ReaskError(str(exc)) from None
    return Question(tuple(phrasings(asks)), expected, expect)


NEEDS_EDITOR = "re-ask spends the project's tokens: asking needs the editor role in this project"


def endpoint_of(project: Project) -> ReaskEndpoint | None:
    return ReaskEndpoint.objects.filter(project=project).first()


def endpoint_for(user, project: Project) -> tuple[ReaskEndpoint | None, str]:
    """The endpoint ``user`` may re-ask through, or None and why not: a question costs the project tokens,
    so a viewer or an ingest key (no logged-in user) reads the replay but sends nothing."""
    off = outbound_off(project)
    if off:
        return None, f"re-ask is off: {off}"
    endpoint = endpoint_of(project)
    if endpoint is None:
        return None, NOT_CONFIGURED
    if not (user.is_authenticated and has_role(user, project, Membership.Role.EDITOR)):
        return None, NEEDS_EDITOR
    return endpoint, ""


def _post(url: str, headers: dict[str, str], body: bytes, deadline: float) -> object:
    if deadline - time.monotonic() <= 0:
        seconds = settings.CTXVIEW_REASK_DEADLINE_SECONDS
        raise ReaskError(f"out of time: a re-ask gets {seconds} seconds for all its answers")
    try:
        data = outbound.post(
            url, headers, body, deadline=deadline, max_bytes=MAX_RESPONSE_BYTES, per_read=TIMEOUT_SECONDS
        )
    except outbound.OutboundRefused as exc:
        raise ReaskError(str(exc)) from None
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
        try:
            key = sealing.unseal(endpoint.sealed_key)
        except sealing.Unreadable:
            raise ReaskError(
                "the stored key can no longer be read (the encryption key changed): an admin enters it again"
            ) from None
        answers = []
        for phrasing in question.phrasings:
            url, headers, body = request(
                endpoint.provider,
                endpoint.base_url,
                endpoint.model,
                key,
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
    """Each policy of a replay (made keeping the query call's window) re-asked, by policy spec. One
    re-ask per project at a time, a few per process (``outbound.reserve``): the answers wait on another
    server, and the web tier's threads must stay free for pages."""
    seconds = settings.CTXVIEW_REASK_DEADLINE_SECONDS
    seq, deadline = result["query_seq"], time.monotonic() + seconds
    try:
        with outbound.reserve(f"project:{endpoint.project_id}", seconds):
            return {
                entry["policy"]: reask_window(endpoint, entry["windows"].get(seq, []), question, deadline)
                for entry in result["policies"]
            }
    except outbound.Busy as exc:
        return {
            entry["policy"]: {"reask": None, "answers": [], "reason": str(exc)}
            for entry in result["policies"]
        }
