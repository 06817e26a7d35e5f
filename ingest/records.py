"""The call record: what one span says about one model call, read (``ingest.normalise``) and then stored
(``ingest.call_rows`` and the steps after it). Its own module, below both, so that the steps that store
records need not import the reading. No Django here.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ctxcore.vocabulary import Item, Usage

# How a text's tokens are counted: (content hash, text) -> tokens (the hash keys a cache of counts).
TokenCounter = Callable[[str, str], int]


@dataclass(frozen=True)
class CallRecord:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    run_key: str
    run_key_source: str
    service: str
    agent_name: str
    provider: str
    operation: str
    request_model: str
    response_model: str
    response_id: str
    usage: Usage
    turn_hint: int | None
    user_fingerprint: str | None
    content_captured: bool
    manifest_source: str  # explicit | derived | none
    manifest_error: str
    items: tuple[Item, ...]
    excluded: tuple[dict, ...]
    budget: dict | None
    prompt_version: str
    tool_calls: tuple[dict, ...]
    tool_definitions: tuple[str, ...] | None
    finish_reasons: tuple[str, ...]
    notes: tuple[str, ...]
    moved_keys: tuple[str, ...] = field(default=())
    # The response the request continues where the provider keeps the earlier turns (previous_response_id)
    # and the response whose turns its window lacks ("" none): the request's own items until rebuilt
    # (ingest.continuations). Its answer as items: what a request continuing its response rebuilds from.
    continues_response: str = ""
    window_gap: str = ""
    output_items: tuple[Item, ...] = ()
    # False for a model-call-kind span that carries no request: no operation declared, no messages, usage,
    # response or manifest (LlamaIndex's span preparing the tool call before each request). No call.
    carries_request: bool = True

    @property
    def model(self) -> str:
        return self.response_model or self.request_model


def datetime_of(ns: int) -> datetime:
    """A span's time (nanoseconds since the epoch, as OTLP gives it) as the datetime stored."""
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)
