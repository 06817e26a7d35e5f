"""Re-ask: a replayed window sent to a model with a question, and its answers scored. No Django, no I/O.

The window's items become the conversation (system items the system prompt, each other item a message of
its role, in window order) and each phrasing of the question the last user message. An answer is right
when the expected pattern is found in it, "unknown" when it says it does not know, wrong otherwise. The
request and the reading of the answer follow the Anthropic Messages API and OpenAI's chat completions;
sending them is the caller's (``ctxview.reask``).
"""

import json
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

from ctxcore.replay.policies import Slot, is_replayed

PROVIDERS = ("anthropic", "openai")
MAX_PHRASINGS = 5
MAX_PHRASING = 500
MAX_ANSWER_TOKENS = 256
ANTHROPIC_VERSION = "2023-06-01"
SCORES = ("right", "wrong", "unknown")
# What a model says when it does not know: a small fixed list, matched case-insensitively. An answer with
# the expected text in it is right even if it hedges.
DONT_KNOW = (
    "i don't know",
    "i do not know",
    "i'm not sure",
    "i am not sure",
    "not sure",
    "i cannot determine",
    "i can't determine",
    "cannot be determined",
    "not mentioned",
    "no information",
    "not enough information",
    "i don't have",
    "i do not have",
    "unknown",
)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})


class ReaskError(ValueError):
    """A question, a pattern or an answer that cannot be used; the message says why."""


class Pattern(Protocol):
    def search(self, text: str) -> object: ...


def phrasings(values: Sequence[str]) -> list[str]:
    """The phrasings of a question as given (each value may hold several separated by ``|``), checked."""
    found = [part.strip() for value in values for part in value.split("|") if part.strip()]
    if not found:
        raise ReaskError("ask must give at least one phrasing of the question")
    if len(found) > MAX_PHRASINGS:
        raise ReaskError(f"ask gives {len(found)} phrasings; at most {MAX_PHRASINGS}")
    for text in found:
        if len(text) > MAX_PHRASING:
            raise ReaskError(f"a phrasing is longer than {MAX_PHRASING} characters")
        if "\x00" in text:
            raise ReaskError("a phrasing must not contain NUL characters")
    return found


def score(answer: str, expected: Pattern) -> str:
    """``right`` when ``expected`` is found in the answer, ``unknown`` when it says it does not know,
    else ``wrong``."""
    if expected.search(answer):
        return "right"
    folded = " ".join(answer.translate(_APOSTROPHES).lower().split())
    if any(re.search(rf"\b{re.escape(phrase)}\b", folded) for phrase in DONT_KNOW):
        return "unknown"
    return "wrong"


def tally(scores: Sequence[str]) -> dict[str, int]:
    return {name: sum(1 for entry in scores if entry == name) for name in SCORES}


def _role(slot: Slot) -> str:
    item = slot.item
    if item.role in ("system", "user", "assistant"):
        return item.role
    return "system" if item.role is None and item.bucket == "system" else "user"


def conversation(window: Sequence[Slot], contents: Mapping[str, str]) -> tuple[str, list[dict]]:
    """The system prompt and the messages of a replayed window, from each item's stored content
    (``contents``: hash -> text). ReaskError when an item's content is unknown: a summary a replay
    made, or content the run did not keep."""
    system: list[str] = []
    messages: list[dict] = []
    for slot in window:
        item = slot.item
        if not slot.known:
            raise ReaskError(f"the window holds a summary ({item.id}) whose text no replay can know")
        text = item.content if is_replayed(item) else contents.get(item.hash)
        if text is None:
            raise ReaskError(f"the content of {item.id} was not kept")
        role = _role(slot)
        if role == "system":
            system.append(text)
        else:
            messages.append({"role": role, "content": text})
    return "\n\n".join(system), messages


def request(
    provider: str, base_url: str, model: str, key: str, system: str, messages: list[dict], question: str
) -> tuple[str, dict[str, str], bytes]:
    """The URL, headers and JSON body asking ``question`` after the window's ``messages``."""
    asked = [*messages, {"role": "user", "content": question}]
    base = base_url.rstrip("/")
    headers = {"content-type": "application/json"}
    if provider == "anthropic":
        body: dict = {"model": model, "max_tokens": MAX_ANSWER_TOKENS, "messages": asked}
        if system:
            body["system"] = system
        headers |= {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}
        return f"{base}/v1/messages", headers, json.dumps(body).encode()
    if provider == "openai":
        system_message = [{"role": "system", "content": system}] if system else []
        body = {"model": model, "max_tokens": MAX_ANSWER_TOKENS, "messages": [*system_message, *asked]}
        headers |= {"authorization": f"Bearer {key}"}
        return f"{base}/chat/completions", headers, json.dumps(body).encode()
    raise ReaskError(f"provider must be one of {', '.join(PROVIDERS)}")


def answer_text(provider: str, payload: object) -> str:
    """The text of a provider's answer; ReaskError when the answer has no text where the API puts it."""
    try:
        if provider == "anthropic":
            parts = payload["content"]  # type: ignore[index]
            texts = [part["text"] for part in parts if part.get("type") == "text"]
        else:
            texts = [payload["choices"][0]["message"]["content"]]  # type: ignore[index]
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ReaskError("the endpoint's answer is not in the provider's format") from None
    if not all(isinstance(text, str) for text in texts):
        raise ReaskError("the endpoint's answer is not in the provider's format")
    return "".join(texts)
