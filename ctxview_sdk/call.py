"""One model call: collect its manifest, usage and response, then emit one GenAI span on ``end()``.

The span is made at ``end()``, in one go, with the recorded start time: nothing is held open while the
agent waits for the model, and synthetic timestamps (a demo, a replay) work the same as real ones.
Argument mistakes raise ``ValueError`` at once; anything else that goes wrong in here is logged to the
``ctxview_sdk`` logger and swallowed, because the agent's work matters more than its telemetry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import attributes as attr
from . import config, payloads
from .manifest import (
    MAX_CONTENT,
    MAX_EXCLUDED,
    MAX_ITEMS,
    MAX_SOURCE,
    Excluded,
    Item,
    Manifest,
    as_ids,
    clip,
    content_hash,
    dumps,
    render,
)
from .tokens import estimate_tokens
from .usage import usage_attributes
from .version import __version__

logger = logging.getLogger("ctxview_sdk")

# Past this many characters the manifest is sent without item contents (hashes and metadata stay), so a
# span stays well inside ctxview's request-size limit.
MAX_MANIFEST_CHARS = 2_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Call:
    """A model call being recorded; use it as a context manager or call ``end()`` yourself."""

    def __init__(
        self,
        run_id: str,
        turn: int,
        model: str,
        provider: str = "anthropic",
        prompt_version: str | None = None,
        start_time: int | datetime | None = None,
    ) -> None:
        for name, value in (("run_id", run_id), ("model", model), ("provider", provider)):
            if not (isinstance(value, str) and value):
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
            raise ValueError(f"turn must be an int >= 1, got {turn!r}")
        if prompt_version is not None and not isinstance(prompt_version, str):
            raise ValueError(f"prompt_version must be a string or None, got {prompt_version!r}")
        self.run_id, self.turn, self.model, self.provider = run_id, turn, model, provider
        self.manifest = Manifest(prompt_version=clip(prompt_version))
        self.usage: dict[str, int] = {}
        self.response_model: str | None = None
        self.response_id: str | None = None
        self.finish_reasons: list[str] | None = None
        self.tool_calls: list[dict[str, Any]] = []
        self.cache_diagnosis: dict[str, Any] = {}
        self.dropped_items = 0
        self.ended = False
        self._ids: set[str] = set()  # included and excluded alike: one id names one candidate
        self._explicit_start = start_time is not None
        self.start_time = _to_ns(start_time, "start_time") if start_time is not None else time.time_ns()
        self._started = time.monotonic_ns()
        # The agent's current span (if any) becomes the parent, as it would for an instrumented client.
        self._parent = otel_context.get_current()

    # -- the manifest -------------------------------------------------------------------------------

    def add_item(
        self,
        id: str,
        kind: str,
        bucket: str,
        *,
        content: Any = None,
        hash: str | None = None,
        role: str | None = None,
        mode: str = "verbatim",
        tokens: int | None = None,
        version: str | None = None,
        source: str | None = None,
        trust: str | None = None,
        supersedes: Iterable[str] | str | None = None,
        pinned: bool = False,
        origin_turn: int | None = None,
        cache_breakpoint: bool = False,
    ) -> Item | None:
        """Add an included item, in render order; content is hashed always and sent only if configured."""
        if id in self._ids:
            raise ValueError(f"item id {id!r} is already in this call")
        try:
            rendered = None if content is None else render(content)
        except (TypeError, ValueError) as error:  # not JSON-serialisable: a programming error
            raise ValueError(f"item {id!r}: content must be a str or JSON-serialisable ({error})") from None
        if rendered is None and hash is None:
            raise ValueError(f"item {id!r} needs its content or its hash")
        if rendered is not None:
            computed = content_hash(rendered)
            if hash is not None and hash != computed:
                raise ValueError(f"item {id!r}: hash {hash!r} is not the hash of its content ({computed})")
            hash = computed
        estimated = tokens is None and rendered is not None
        if estimated:
            tokens = _safely(estimate_tokens, rendered, hash, default=None)
        sent, truncated = self._content_to_send(rendered)
        item = Item(
            id=id,
            kind=kind,
            bucket=bucket,
            hash=hash,
            role=role,
            mode=mode,
            tokens=tokens,
            tokens_estimated=estimated and tokens is not None,
            version=clip(version),
            source=clip(source, MAX_SOURCE),
            trust=trust,
            supersedes=as_ids(supersedes),
            pinned=bool(pinned),
            origin_turn=origin_turn,
            cache_breakpoint=bool(cache_breakpoint),
            content=sent,
            content_truncated=truncated,
        )
        if self.ended:
            logger.warning("ctxview_sdk: add_item(%r) after end(); ignored", id)
            return None
        if len(self.manifest.items) >= MAX_ITEMS:
            self.dropped_items += 1
            if self.dropped_items == 1:
                logger.error("ctxview_sdk: more than %d items in one call; the rest are dropped", MAX_ITEMS)
            return None
        self._ids.add(id)
        self.manifest.items.append(item)
        return item

    def exclude(
        self,
        id: str,
        reason: str,
        tokens: int | None = None,
        kind: str | None = None,
        source: str | None = None,
        version: str | None = None,
    ) -> Excluded | None:
        """Record a candidate the context builder left out, and why (superseded, budget, ...)."""
        if id in self._ids:
            raise ValueError(f"excluded id {id!r} is already in this call")
        entry = Excluded(
            id=id,
            reason=reason,
            tokens=tokens,
            kind=kind,
            source=clip(source, MAX_SOURCE),
            version=clip(version),
        )
        if self.ended:
            logger.warning("ctxview_sdk: exclude(%r) after end(); ignored", id)
            return None
        if len(self.manifest.excluded) >= MAX_EXCLUDED:
            logger.warning("ctxview_sdk: too many excluded items; %r dropped", id)
            return None
        self._ids.add(id)
        self.manifest.excluded.append(entry)
        return entry

    def set_budget(
        self, limit: int | None = None, reserved_output: int | None = None, input: int | None = None
    ) -> None:
        """Set the window limit, the reserved output and the builder's own input count (None: unchanged)."""
        self.manifest.budget.update(limit=limit, input=input, reserved_output=reserved_output)

    def items_from_anthropic(self, request: Mapping[str, Any]) -> list[Item]:
        """Add one item per tool, system block and message of an Anthropic Messages request."""
        return self._add_drafts(request, payloads.anthropic_items)

    def items_from_openai(self, request: Mapping[str, Any]) -> list[Item]:
        """Add one item per tool and message of an OpenAI Chat Completions (or Responses) request."""
        return self._add_drafts(request, payloads.openai_items)

    # -- the outcome --------------------------------------------------------------------------------

    def set_usage(self, usage: Any) -> None:
        """Attach the provider's usage (Anthropic or OpenAI object or dict); unknown figures stay absent."""
        self.usage = _safely(usage_attributes, usage, self.provider, default={})

    def set_response(
        self,
        model: str | None = None,
        response_id: str | None = None,
        finish_reasons: Iterable[str] | None = None,
    ) -> None:
        """Record the served model, the response id and the finish reasons, as the provider reports them."""
        if model is not None:
            self.response_model = str(model)
        if response_id is not None:
            self.response_id = str(response_id)
        if finish_reasons is not None:
            reasons = [finish_reasons] if isinstance(finish_reasons, str) else finish_reasons
            self.finish_reasons = [str(reason) for reason in reasons if reason is not None]

    def set_cache_diagnosis(self, reason: str, missed_input_tokens: int | None = None) -> None:
        """The provider's reason for a cache miss (Anthropic's ``cache_miss_reason``), shown beside ours."""
        if not (isinstance(reason, str) and reason):
            raise ValueError(f"a cache-miss reason must be a non-empty string, got {reason!r}")
        valid = isinstance(missed_input_tokens, int) and not isinstance(missed_input_tokens, bool)
        if missed_input_tokens is not None and not (valid and missed_input_tokens >= 0):
            raise ValueError(f"missed_input_tokens must be an int >= 0, got {missed_input_tokens!r}")
        self.cache_diagnosis = {
            attr.CACHE_MISS_REASON_TYPE: reason[:100],
            attr.CACHE_MISSED_INPUT_TOKENS: missed_input_tokens,
        }

    def add_tool_call(self, name: str, id: str | None = None, arguments: Any = None) -> None:
        """Record a tool call the model asked for in its answer (sent as gen_ai.output.messages)."""
        if not (isinstance(name, str) and name):
            raise ValueError(f"a tool call needs a name, got {name!r}")
        self.tool_calls.append({"type": "tool_call", "id": id, "name": name, "arguments": arguments})

    def end(self, end_time: int | datetime | None = None, error: BaseException | None = None) -> None:
        """Emit the span (once); never blocks on the network and never raises for an export problem."""
        if self.ended:
            return
        if end_time is not None:
            end_ns = _to_ns(end_time, "end_time")
        elif self._explicit_start:  # keep synthetic timelines consistent: start + the real elapsed time
            end_ns = self.start_time + (time.monotonic_ns() - self._started)
        else:
            end_ns = time.time_ns()
        if end_ns < self.start_time:
            raise ValueError("end_time is before start_time")
        self.ended = True
        try:
            self._emit(end_ns, error)
        except Exception:
            logger.exception("ctxview_sdk: could not record the call")

    def attributes(self) -> dict[str, Any]:
        """The span attributes this call will carry (the manifest as compact JSON)."""
        attributes: dict[str, Any] = {
            attr.OPERATION_NAME: attr.OPERATION_CHAT,
            attr.PROVIDER_NAME: self.provider,
            attr.REQUEST_MODEL: self.model,
            attr.CONVERSATION_ID: self.run_id,
            attr.RUN_ID: self.run_id,
            attr.TURN: self.turn,
            attr.MANIFEST: self.manifest_json(),
            attr.SDK_VERSION: __version__,
        }
        optional = {
            attr.RESPONSE_MODEL: self.response_model,
            attr.RESPONSE_ID: self.response_id,
            attr.RESPONSE_FINISH_REASONS: self.finish_reasons,
            attr.MANIFEST_DROPPED_ITEMS: self.dropped_items or None,
            # Only the tool calls, never the answer's text: which tools the model asked for is metadata.
            attr.OUTPUT_MESSAGES: dumps([{"role": "assistant", "parts": self.tool_calls}])
            if self.tool_calls
            else None,
        }
        optional.update(self.cache_diagnosis)
        attributes.update({key: value for key, value in optional.items() if value is not None})
        attributes.update(self.usage)
        return attributes

    def manifest_json(self) -> str:
        """The manifest as sent in ``ctxview.manifest``: compact JSON, without contents if it grew too big."""
        text = dumps(self.manifest.to_dict())
        if len(text) > MAX_MANIFEST_CHARS:
            logger.warning(
                "ctxview_sdk: manifest of %d characters; sending it without item contents", len(text)
            )
            text = dumps(self.manifest.to_dict(with_content=False))
        return text

    def __enter__(self) -> Call:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            self.end(error=error)
        except ValueError:
            logger.exception("ctxview_sdk: could not end the call")

    # -- internals ----------------------------------------------------------------------------------

    def _emit(self, end_ns: int, error: BaseException | None) -> None:
        sdk = config.active()
        if sdk is None:
            config.warn_unconfigured()
            return
        span = sdk.tracer.start_span(
            f"{attr.OPERATION_CHAT} {self.model}",
            context=self._parent,
            kind=SpanKind.CLIENT,
            attributes=self.attributes(),
            start_time=self.start_time,
        )
        if error is not None:
            span.set_attribute(attr.ERROR_TYPE, type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)[:256]))
        span.end(end_time=end_ns)  # hands the span to the batch processor's queue; no I/O here

    def _content_to_send(self, rendered: str | None) -> tuple[str | None, bool]:
        """The content to send if configured (redacted, then cut), and whether it is not the hashed text."""
        sdk = config.active()
        if rendered is None or sdk is None or not sdk.settings.send_content:
            return None, False
        text: object = rendered
        if sdk.settings.redact is not None:
            try:
                text = sdk.settings.redact(rendered)
            except Exception:  # fail closed: an item whose redaction failed is sent without content
                logger.exception("ctxview_sdk: the redact hook failed; content not sent")
                return None, True
            if not isinstance(text, str):
                logger.error(
                    "ctxview_sdk: the redact hook returned %s, not str; content not sent", type(text)
                )
                return None, True
        limit = min(sdk.settings.content_limit, MAX_CONTENT)
        # content_truncated tells the receiver not to check this text against the hash: cut or redacted.
        return text[:limit], text != rendered or len(text) > limit

    def _add_drafts(self, request: Mapping[str, Any], build: Any) -> list[Item]:
        if not isinstance(request, Mapping):
            raise ValueError(f"request must be a dict, got {type(request).__name__}")
        added: list[Item] = []
        try:
            drafts = build(request)
        except Exception:
            logger.exception("ctxview_sdk: could not read the request payload")
            return added
        for draft in drafts:
            draft["id"] = self._unique(draft["id"])
            try:
                item = self.add_item(**draft)
            except Exception:  # the request is data, not a programming error: skip the piece, keep the rest
                logger.exception("ctxview_sdk: skipped an item of the request payload")
                continue
            if item is not None:
                added.append(item)
        reserved = payloads.reserved_output(request)
        if reserved is not None and self.manifest.budget.reserved_output is None:
            self.manifest.budget.reserved_output = reserved
        return added

    def _unique(self, base: str) -> str:
        """``base``, or ``base#2``, ``base#3``... when it is already taken in this call."""
        candidate, number = base, 1
        while candidate in self._ids:
            number += 1
            candidate = f"{base}#{number}"
        return candidate


def call(
    run_id: str,
    turn: int,
    model: str,
    provider: str = "anthropic",
    prompt_version: str | None = None,
    start_time: int | datetime | None = None,
) -> Call:
    """Start recording one model call of run ``run_id`` at turn ``turn`` (from 1)."""
    return Call(run_id, turn, model, provider=provider, prompt_version=prompt_version, start_time=start_time)


def _to_ns(value: int | datetime, name: str) -> int:
    """Nanoseconds since the epoch from an int (ns) or a datetime (naive means UTC: reproducible demos)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return (value - _EPOCH) // timedelta(microseconds=1) * 1000
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError(f"{name} must be nanoseconds since the epoch (int) or a datetime, got {value!r}")


def _safely(function: Any, *args: Any, default: Any) -> Any:
    try:
        return function(*args)
    except Exception:
        logger.exception("ctxview_sdk: %s failed", getattr(function, "__name__", function))
        return default
