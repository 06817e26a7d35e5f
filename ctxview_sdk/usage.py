"""Provider usage objects -> OTel GenAI usage attributes, normalised once, here.

OTel (v1.40+) wants ``gen_ai.usage.input_tokens`` to include cached tokens. Anthropic's ``input_tokens``
excludes them (so we add cache read and cache creation back); OpenAI's ``prompt_tokens`` /
``input_tokens`` already include ``cached_tokens``. A figure the provider did not report is left out,
never written as 0: ctxview tells "unknown" from "none".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from . import attributes as attr

logger = logging.getLogger("ctxview_sdk")

ANTHROPIC = "anthropic"
OPENAI_CHAT = "openai_chat"
OPENAI_RESPONSES = "openai_responses"

_OPENAI_KEYS = {
    OPENAI_CHAT: ("prompt_tokens", "completion_tokens"),
    OPENAI_RESPONSES: ("input_tokens", "output_tokens"),
}


def usage_attributes(usage: Any, provider: str | None = None) -> dict[str, int]:
    """Map an Anthropic or OpenAI (Chat or Responses) usage object or dict to GenAI usage attributes."""
    data = as_mapping(usage)
    if data is None:
        logger.warning("ctxview_sdk: ignoring usage of type %s", type(usage).__name__)
        return {}
    shape = usage_shape(data, provider)
    if shape in _OPENAI_KEYS:
        # The two OpenAI APIs differ only in names: Chat's prompt/completion, Responses' input/output.
        input_key, output_key = _OPENAI_KEYS[shape]
        total_in = _count(data, input_key)
        cache_read = _count(data, f"{input_key}_details", "cached_tokens")
        cache_write = _count(data, f"{input_key}_details", "cache_write_tokens")
        output = _count(data, output_key)
        reasoning = _count(data, f"{output_key}_details", "reasoning_tokens")
    else:
        uncached = _count(data, "input_tokens")
        cache_read = _count(data, "cache_read_input_tokens")
        cache_write = _count(data, "cache_creation_input_tokens")
        if cache_write is None:  # only the per-TTL breakdown was given
            parts = [
                _count(data, "cache_creation", ttl)
                for ttl in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
            ]
            known = [part for part in parts if part is not None]
            cache_write = sum(known) if known else None
        # A cache figure that is absent adds nothing: the request simply did not use that cache.
        total_in = None if uncached is None else uncached + (cache_read or 0) + (cache_write or 0)
        output = _count(data, "output_tokens")
        reasoning = _count(data, "output_tokens_details", "thinking_tokens")
        if reasoning is None:
            reasoning = _count(data, "output_tokens_details", "reasoning_tokens")
    found = {
        attr.USAGE_INPUT_TOKENS: total_in,
        attr.USAGE_OUTPUT_TOKENS: output,
        attr.USAGE_CACHE_READ_INPUT_TOKENS: cache_read,
        attr.USAGE_CACHE_CREATION_INPUT_TOKENS: cache_write,
        attr.USAGE_REASONING_OUTPUT_TOKENS: reasoning,
    }
    return {key: value for key, value in found.items() if value is not None}


def usage_shape(data: Mapping[str, Any], provider: str | None = None) -> str:
    """Tell the usage shape from its keys; the call's provider breaks the tie for bare input/output."""
    if "prompt_tokens" in data or "completion_tokens" in data:
        return OPENAI_CHAT
    if any(
        key in data for key in ("cache_read_input_tokens", "cache_creation_input_tokens", "cache_creation")
    ):
        return ANTHROPIC
    if "input_tokens_details" in data:
        return OPENAI_RESPONSES
    return OPENAI_RESPONSES if provider and provider.startswith(("openai", "azure.ai.openai")) else ANTHROPIC


def as_mapping(value: Any) -> Mapping[str, Any] | None:
    """A dict view of a usage dict, a pydantic model (the provider SDKs) or a plain object."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump()
            if isinstance(dumped, Mapping):
                return dumped
        except Exception:
            logger.debug("ctxview_sdk: model_dump() failed on %s", type(value).__name__, exc_info=True)
    if hasattr(value, "__dict__") and not isinstance(value, (int, float, str, bytes)):
        return {key: item for key, item in vars(value).items() if not key.startswith("_")}
    return None


def _count(data: Mapping[str, Any], *path: str) -> int | None:
    """A non-negative integer at ``path``, or None when absent, null or not a count."""
    value: Any = data
    for key in path:
        value = as_mapping(value)
        if value is None:
            return None
        value = value.get(key)
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and value >= 0:
        return value
    logger.warning("ctxview_sdk: ignoring usage field %s=%r", ".".join(path), value)
    return None
