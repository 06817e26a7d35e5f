"""Which run and which agent a call belongs to, from what its request carries. No Django here.

The rule, in order (the README's "No instrumentation? Put the proxy in front" says the same):

1. ``X-Ctxview-Run: NAME`` names the run: ``ctxview.run.id`` = NAME.
2. Else a session id the client sends: Claude Code's ``X-Claude-Code-Session-Id``, or a ``session_id`` /
   ``session-id`` / ``x-session-id`` / ``conversation_id`` header (Codex CLI sends ``session_id``):
   ``gen_ai.conversation.id`` = that id.
3. Else, among the calls of one provider key and one client (its User-Agent), the shared-prefix chain
   of the messages: a call continues the open conversation whose last request's messages are a prefix
   of its own, the longest such; failing that, the one sharing the longest prefix of messages with it,
   at least the first; failing that (or after a gap of ``RUN_GAP_S`` without calls) it starts a run,
   keyed ``proxy-<hash>-<first call's time>-<its start>``. So two agents (or sub-agents, or terminals)
   talking at the same time are two runs, not one interleaved run. The system prompt and the tools are
   left out of the match on purpose: a volatile line in the system prompt or a tool added mid-session is
   what breaks the cache, and it must show as a break within the run, not start another. An OpenAI
   Responses call that names a ``previous_response_id`` continues the conversation whose last answer had
   that id. A call with no readable request (or no messages) continues the latest.

Only digests are kept per open conversation (``Conversation``: O(log messages) of them, never the
text), for at most ``MAX_OPEN`` conversations per key and client and ``MAX_GROUPS`` keys and clients.

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
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import orjson

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
RUN_RULE = "ctxview.proxy.run_rule"  # header | session | key_client_prefix | key_client_gap

RUN_GAP_S = 30 * 60
MAX_NAME = 200
MAX_OPEN = 64  # open conversations kept per key and client; the least recently continued are dropped
MAX_GROUPS = 10_000  # keys and clients kept; the least recently seen are dropped
ANCHOR = 1  # messages a call must share to continue a conversation: the first
DIGEST_SIZE = 16


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

    def __init__(
        self, gap_s: float = RUN_GAP_S, max_open: int = MAX_OPEN, max_groups: int = MAX_GROUPS
    ) -> None:
        self.gap_s = gap_s
        self.max_open = max_open
        self.max_groups = max_groups
        # (key hash, client, route) -> its open conversations, least recently continued first.
        self._groups: OrderedDict[tuple[str, str, str], list[Conversation]] = OrderedDict()

    def attributes(
        self,
        headers: dict[str, str],
        key_hash: str,
        route: str,
        start_s: float,
        window: Window | None = None,
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
        group = (key_hash, headers.get("user-agent", ""), route)
        attributes[RUN_ID] = self._by_conversation(group, window, start_s)
        attributes[RUN_RULE] = "key_client_prefix" if window is not None else "key_client_gap"
        return attributes

    def chains(self, headers: dict[str, str]) -> bool:
        """Whether a call with these headers is placed by the prefix chain (so needs its ``Window``)."""
        return not any(headers.get(name, "").strip() for name in (RUN_HEADER, *SESSION_HEADERS))

    def open_conversations(self, key_hash: str, client: str, route: str) -> int:
        """How many conversations of one key and client are open (tests)."""
        return len(self._groups.get((key_hash, client, route), ()))

    def _by_conversation(self, group: tuple[str, str, str], window: Window | None, start_s: float) -> str:
        conversations = [c for c in self._groups.pop(group, []) if start_s - c.last_s <= self.gap_s]
        self._groups[group] = conversations  # the most recently used group last
        if window is None:
            # Nothing to chain on (a body that is not JSON): the group's latest conversation, as before.
            chosen = max(conversations, key=lambda c: c.last_s, default=None)
        else:
            chosen = _continued(conversations, window)
        if chosen is None:
            chosen = Conversation(self._name(group, conversations, window, start_s), start_s)
        else:
            conversations.remove(chosen)
        chosen.last_s = max(chosen.last_s, start_s)
        if window is not None:
            chosen.follow(window)
        conversations.append(chosen)
        del conversations[: -self.max_open]  # the least recently continued go first
        while len(self._groups) > self.max_groups:
            self._groups.popitem(last=False)
        return chosen.name

    def _name(
        self, group: tuple[str, str, str], open_: list[Conversation], window: Window | None, start_s: float
    ) -> str:
        digest = hashlib.sha256("\x00".join(group).encode()).hexdigest()[:10]
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(start_s))
        name = f"proxy-{digest}-{stamp}"
        if window is not None and window.chain:
            name += "-" + window.chain[min(window.anchor, len(window.chain)) - 1].hex()[:6]
        taken = {c.name for c in open_}
        unique, number = name, 1
        while unique in taken:  # two conversations opened in the same second with the same beginning
            number += 1
            unique = f"{name}-{number}"
        return unique


@dataclass(frozen=True)
class Window:
    """A call's messages as cumulative digests, one per message; never the text."""

    chain: tuple[bytes, ...]  # chain[i]: the digest of parts 0..i
    anchor: int  # how many leading parts another call must share to be the same conversation
    response_id: str = ""
    previous_response_id: str = ""


def window_of(
    system: str | None,
    tools: str | None,
    messages: str | None,
    response_id: str = "",
    previous_response_id: str = "",
) -> Window | None:
    """The window of a recorded call, from its span's JSON strings; None when the request had none."""
    listed = orjson.loads(messages) if messages else []
    # The messages only: system and tools are what a cache break changes, not which conversation it is.
    parts = [orjson.dumps(message) for message in listed] if isinstance(listed, list) else []
    if not parts:
        return None
    hasher = hashlib.blake2b(digest_size=DIGEST_SIZE)
    chain = []
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
        chain.append(hasher.copy().digest())
    return Window(tuple(chain), min(ANCHOR, len(chain)), response_id, previous_response_id)


@dataclass
class Conversation:
    """An open conversation: its run, when it was last continued, and checkpoints of its last window.

    The checkpoints are the chain's digests at the anchor, at each power of two and at its end, so a
    conversation keeps O(log messages) digests: enough to tell "its last request is a prefix of this
    one" exactly, and how long a prefix it shares otherwise to within a factor of two.
    """

    name: str
    last_s: float
    length: int = 0
    checkpoints: dict[int, bytes] = field(default_factory=dict)
    response_id: str = ""

    def follow(self, window: Window) -> None:
        chain = window.chain
        positions = {window.anchor, len(chain)} | {1 << n for n in range(len(chain).bit_length())}
        self.checkpoints = {p: chain[p - 1] for p in positions if 0 < p <= len(chain)}
        self.length = len(chain)
        self.response_id = window.response_id

    def extended_by(self, window: Window) -> bool:
        """Whether this conversation's last request is a prefix of (or the same as) ``window``'s."""
        end = self.checkpoints.get(self.length)
        return end is not None and self.length <= len(window.chain) and window.chain[self.length - 1] == end

    def shared(self, window: Window) -> int:
        """How many leading parts it shares with ``window`` (a lower bound, from the checkpoints)."""
        return max(
            (
                p
                for p, digest in self.checkpoints.items()
                if p <= len(window.chain) and window.chain[p - 1] == digest
            ),
            default=0,
        )


def _continued(conversations: list[Conversation], window: Window) -> Conversation | None:
    """The open conversation ``window`` continues, or None: it starts one.

    First the one its ``previous_response_id`` names (OpenAI Responses sends only the new turn); then
    the longest whose last request is a prefix of this one; then the one sharing the longest prefix,
    at least the anchor (the first message). Ties go to the most recently continued.
    """
    if window.previous_response_id:
        for conversation in reversed(conversations):
            if conversation.response_id == window.previous_response_id:
                return conversation
        return max(conversations, key=lambda c: c.last_s, default=None)
    prefixes = [c for c in conversations if c.extended_by(window)]
    if prefixes:
        return max(reversed(prefixes), key=lambda c: c.length)
    best, best_shared = None, window.anchor - 1
    for conversation in reversed(conversations):
        shared = conversation.shared(window)
        if shared > best_shared:
            best, best_shared = conversation, shared
    return best
