"""Record a story's calls through the ctxview SDK, with usage from a simple prefix-cache model.

The model is Anthropic's: a call reads from the cache the longest prefix (in render order) it shares
with the run's previous call, if that call was less than five minutes ago and the prefix is at least
1,024 tokens; everything else is written to the cache; the per-message framing is the uncached rest.
So the figures the demo reports agree with what its manifests show.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import ctxview_sdk
from ctxview_sdk import content_hash, render
from ingest import tokens

TTL = timedelta(minutes=5)
MINIMUM_CACHEABLE = 1024
FRAMING_PER_MESSAGE = 3
BUDGET = {"limit": 200_000, "reserved_output": 8_000}


@dataclass(frozen=True)
class Piece:
    """One item of the window a story builds."""

    id: str
    kind: str
    bucket: str
    content: object
    role: str | None = None
    mode: str = "verbatim"
    version: str | None = None
    source: str | None = None
    trust: str | None = None
    supersedes: tuple[str, ...] = ()
    pinned: bool = False
    origin_turn: int | None = None
    tokens: int | None = None  # for references: what the item costs, not what it points at


@dataclass
class Recorder:
    run_id: str
    model: str
    provider: str = "anthropic"
    calls: int = 0
    _previous: list[tuple[str, int]] = field(default_factory=list)
    _previous_at: datetime | None = None
    _token_cache: dict[str, int] = field(default_factory=dict)

    def _tokens(self, piece: Piece, text: str) -> int:
        if piece.tokens is not None:
            return piece.tokens
        digest = content_hash(text)
        if digest not in self._token_cache:
            self._token_cache[digest] = tokens.count(text)
        return self._token_cache[digest]

    def call(
        self,
        turn: int,
        at: datetime,
        pieces: list[Piece],
        excluded: list[dict] = (),  # type: ignore[assignment]
        tool_calls: list[str] = (),  # type: ignore[assignment]
        output_tokens: int = 200,
        prompt_version: str = "v1",
    ) -> None:
        rendered = [render(piece.content) for piece in pieces]
        sizes = [self._tokens(piece, text) for piece, text in zip(pieces, rendered, strict=True)]
        chain = [(content_hash(text), size) for text, size in zip(rendered, sizes, strict=True)]
        read = 0
        if self._previous_at is not None and at - self._previous_at <= TTL:
            for mine, theirs in zip(chain, self._previous, strict=False):
                if mine[0] != theirs[0]:
                    break
                read += mine[1]
        if read < MINIMUM_CACHEABLE:
            read = 0
        items_total = sum(sizes)
        write = items_total - read if items_total >= MINIMUM_CACHEABLE else 0
        framing = FRAMING_PER_MESSAGE * sum(
            1 for piece in pieces if piece.role in ("user", "assistant", "tool")
        )
        uncached = framing + (items_total if items_total < MINIMUM_CACHEABLE else 0)

        with ctxview_sdk.call(
            self.run_id, turn, self.model, self.provider, prompt_version, start_time=at
        ) as call:
            for piece, size in zip(pieces, sizes, strict=True):
                call.add_item(
                    piece.id,
                    piece.kind,
                    piece.bucket,
                    content=piece.content,
                    tokens=size,
                    role=piece.role,
                    mode=piece.mode,
                    version=piece.version,
                    source=piece.source,
                    trust=piece.trust,
                    supersedes=list(piece.supersedes),
                    pinned=piece.pinned,
                    origin_turn=piece.origin_turn,
                )
            for entry in excluded:
                call.exclude(**entry)
            call.set_budget(**BUDGET)
            call.set_usage(
                {
                    "input_tokens": uncached,
                    "cache_creation_input_tokens": write,
                    "cache_read_input_tokens": read,
                    "output_tokens": output_tokens,
                }
            )
            for name in tool_calls:
                call.add_tool_call(name, id=f"toolu_{self.calls:04d}_{name}")
            call.set_response(model=self.model, finish_reasons=["tool_use" if tool_calls else "end_turn"])
            call.end(end_time=at + timedelta(seconds=4 + output_tokens / 60))
        self.calls += 1
        self._previous, self._previous_at = chain, at
