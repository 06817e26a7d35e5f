"""Which run and which agent a call belongs to, from what its request carries. No Django here.

The rule, in order (the README's "No instrumentation? Put the proxy in front" says the same):

1. ``X-Ctxview-Run: NAME`` names the run: ``ctxview.run.id`` = NAME.
2. Else a session id the client sends: Claude Code's ``X-Claude-Code-Session-Id``, or a ``session_id`` /
   ``session-id`` / ``x-session-id`` / ``conversation_id`` header (Codex CLI sends ``session_id``):
   ``gen_ai.conversation.id`` = that id.
3. Else the calls of one provider key and one client (its User-Agent) form a run until a gap of
   ``RUN_GAP_S`` without calls; the run is keyed ``proxy-<hash>-<first call's time>``.

Either way ingest then splits the run into turns and agents by the same rules as for any other span.
The agent: ``X-Ctxview-Agent: NAME`` is ``gen_ai.agent.name``; Claude Code's
``X-Claude-Code-Agent-Id`` (set on a subagent's requests) is ``gen_ai.agent.id``.

The provider key is only ever kept as an HMAC under a salt of this installation (``key_hash``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from pathlib import Path

RUN_HEADER = "x-ctxview-run"
AGENT_HEADER = "x-ctxview-agent"
SESSION_HEADERS = ("x-claude-code-session-id", "session_id", "session-id", "x-session-id", "conversation_id")
AGENT_ID_HEADERS = ("x-claude-code-agent-id",)
# Headers that carry a provider key: Anthropic (x-api-key), OpenAI (Authorization), Gemini (x-goog-api-key).
KEY_HEADERS = ("x-api-key", "authorization", "x-goog-api-key", "api-key")
KEY_QUERY = "key"  # Gemini also takes the key as ?key=

RUN_ID = "ctxview.run.id"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
KEY_HASH = "ctxview.proxy.key_hash"
RUN_RULE = "ctxview.proxy.run_rule"  # which rule named the run: header | session | key_client_gap

RUN_GAP_S = 30 * 60
MAX_NAME = 200


def load_salt(directory: Path) -> bytes:
    """This installation's salt (created once, 0600, beside the spool): the same key, the same hash."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "salt"
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    salt = secrets.token_bytes(32)
    temporary = directory / f"salt.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(salt)
    try:
        os.link(temporary, path)  # fails if another proxy created it meanwhile: then use that one
    except FileExistsError:
        pass
    finally:
        temporary.unlink()
    return path.read_bytes()


def key_hash(salt: bytes, key: str) -> str:
    """A salted hash of a provider key: groups calls by key without keeping the key."""
    if not key:
        return ""
    return hmac.new(salt, key.encode(), hashlib.sha256).hexdigest()[:24]


def provider_key(headers: dict[str, str], query: dict[str, str]) -> str:
    for name in KEY_HEADERS:
        value = headers.get(name, "")
        if value:
            return value.removeprefix("Bearer ").removeprefix("bearer ").strip()
    return query.get(KEY_QUERY, "")


class Runs:
    """Names the run and agent of each call; one instance per proxy, used from one thread."""

    def __init__(self, gap_s: float = RUN_GAP_S) -> None:
        self.gap_s = gap_s
        self._open: dict[tuple[str, str, str], tuple[str, float]] = {}

    def attributes(
        self, headers: dict[str, str], key_hash: str, route: str, start_s: float
    ) -> dict[str, str]:
        attributes: dict[str, str] = {}
        if key_hash:
            attributes[KEY_HASH] = key_hash
        agent = headers.get(AGENT_HEADER, "").strip()
        if agent:
            attributes[AGENT_NAME] = agent[:MAX_NAME]
        for name in AGENT_ID_HEADERS:
            if headers.get(name, "").strip():
                attributes[AGENT_ID] = headers[name].strip()[:MAX_NAME]
                break
        run = headers.get(RUN_HEADER, "").strip()
        if run:
            attributes[RUN_ID] = run[:MAX_NAME]
            attributes[RUN_RULE] = "header"
            return attributes
        for name in SESSION_HEADERS:
            session = headers.get(name, "").strip()
            if session:
                attributes[CONVERSATION_ID] = session[:MAX_NAME]
                attributes[RUN_RULE] = "session"
                return attributes
        attributes[RUN_ID] = self._by_gap(key_hash, headers.get("user-agent", ""), route, start_s)
        attributes[RUN_RULE] = "key_client_gap"
        return attributes

    def _by_gap(self, key_hash: str, client: str, route: str, start_s: float) -> str:
        group = (key_hash, client, route)
        current = self._open.get(group)
        if current is not None and start_s - current[1] <= self.gap_s:
            self._open[group] = (current[0], max(current[1], start_s))
            return current[0]
        digest = hashlib.sha256("\x00".join(group).encode()).hexdigest()[:10]
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start_s))
        name = f"proxy-{digest}-{stamp}"
        self._open[group] = (name, start_s)
        if len(self._open) > 10_000:  # forget groups idle past the gap
            self._open = {k: v for k, v in self._open.items() if start_s - v[1] <= self.gap_s}
        return name
