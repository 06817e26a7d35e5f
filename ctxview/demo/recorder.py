"""Record a story's calls through the ctxview SDK, with usage from a simple prefix-cache model.

The model is Anthropic's: a call reads from the cache the longest prefix (in render order) it shares
with its agent's previous call (the run's previous call when the story has one agent), if that call was
less than five minutes ago and the prefix is at least 1,024 tokens; everything else is written to the
cache; the per-message framing is the uncached rest. So the figures the demo reports agree with what its
manifests show. A multi-agent story wraps its calls in agent and tool spans (``span``), as an
instrumented framework does.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace

import ctxview_sdk
from ctxcore import vocabulary
from ctxview_sdk import config, content_hash, render
from ingest import tokens

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TTL = timedelta(minutes=5)
MINIMUM_CACHEABLE = 1024
FRAMING_PER_MESSAGE = 3
BUDGET = {"limit": 200_000, "reserved_output": 8_000}


# What a story may say of an item beyond its id, kind, bucket and content: the vocabulary's fields (declared
# there once), less those the recorder works out (hash, position, the estimate flag) or leaves to the SDK.
PIECE_FIELDS = {
    item_field.name: item_field.default
    for item_field in fields(vocabulary.Item)
    if item_field.default is not MISSING
    and item_field.name not in {"tokens_estimated", "content", "content_truncated", "cache_breakpoint"}
}


class Piece:
    """One item of the window a story builds: its content before rendering, and any of the vocabulary
    item's fields (``PIECE_FIELDS``; ``tokens`` on a reference is what the item costs, not what it points
    at). Read like the item: ``piece.role``, ``piece.origin_turn``."""

    __slots__ = ("id", "kind", "bucket", "content", "fields")

    def __init__(self, id: str, kind: str, bucket: str, content: object, **item_fields: Any) -> None:
        unknown = item_fields.keys() - PIECE_FIELDS.keys()
        if unknown:
            raise TypeError(f"a piece has no field {', '.join(sorted(unknown))} (ctxcore.vocabulary.Item)")
        self.id, self.kind, self.bucket, self.content = id, kind, bucket, content
        self.fields = item_fields

    def __getattr__(self, name: str) -> Any:
        if name not in PIECE_FIELDS:
            raise AttributeError(name)
        return self.fields.get(name, PIECE_FIELDS[name])


@dataclass
class Recorder:
    run_id: str
    model: str
    provider: str = "anthropic"
    calls: int = 0
    # Per agent (None: the story's only one), the previous call's (hash, tokens) chain and its time.
    _previous: dict[str | None, tuple[list[tuple[str, int]], datetime]] = field(default_factory=dict)
    _last_end: datetime | None = None
    _token_cache: dict[str, int] = field(default_factory=dict)

    @contextmanager
    def span(self, name: str, attributes: dict, start: datetime) -> Iterator[None]:
        """An agent or tool span around the calls made inside it (they become its children); it ends a
        second after the last of them."""
        pipeline = config.active()
        if pipeline is None:
            raise RuntimeError("configure the ctxview SDK before recording a story")
        opened = pipeline.tracer.start_span(name, attributes=attributes, start_time=_ns(start))
        with trace.use_span(opened, end_on_exit=False):
            yield
        opened.end(end_time=_ns(max(start, self._last_end or start) + timedelta(seconds=1)))

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
        agent: str | None = None,
    ) -> None:
        rendered = [render(piece.content) for piece in pieces]
        sizes = [self._tokens(piece, text) for piece, text in zip(pieces, rendered, strict=True)]
        chain = [(content_hash(text), size) for text, size in zip(rendered, sizes, strict=True)]
        read = 0
        previous, previous_at = self._previous.get(agent, ([], None))
        if previous_at is not None and at - previous_at <= TTL:
            for mine, theirs in zip(chain, previous, strict=False):
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
                    **(piece.fields | {"tokens": size}),
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
            end = at + timedelta(seconds=4 + output_tokens / 60)
            call.end(end_time=end)
        self.calls += 1
        self._previous[agent] = (chain, at)
        self._last_end = end


def _ns(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000
