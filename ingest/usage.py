"""Token usage of a model call, normalised once, at ingest. No Django here.

Every family reports input tokens differently: OTel (v1.40+), OpenInference and OpenLLMetry report an
input figure that *includes* cached tokens; a few emitters copy Anthropic's or Bedrock's exclusive
``input_tokens`` verbatim. ctxview stores the split: ``uncached + cache_write + cache_read =
prompt_total``. A figure the source did not report is None (unknown), never 0.
"""

import re
from typing import Any

from ctxcore.vocabulary import Usage
from ingest import otlp, semconv

# Providers whose prompt caching has no separate write charge: a reported cache read with no write
# figure means nothing was written (OpenAI-style automatic caching; Gemini writes through another API).
_NO_CACHE_WRITES = frozenset(
    {"openai", "azure.ai.openai", "azure.ai.inference", "gcp.gen_ai", "deepseek", "x_ai"}
)

# Emitters that leave zero figures out: there an absent cache figure beside a reported input is 0.
_OMITS_ZERO_FIGURES = ("pydantic-ai", "pydantic_ai")

_PROVIDER_ALIASES = {
    "xai": "x_ai",
    "mistralai": "mistral_ai",
    "az.ai.openai": "azure.ai.openai",
    "azure": "azure.ai.openai",
    "az.ai.inference": "azure.ai.inference",
    "vertex_ai": "gcp.vertex_ai",
    "vertexai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "google": "gcp.gen_ai",
    "aws": "aws.bedrock",
    "amazon": "aws.bedrock",
    "bedrock": "aws.bedrock",
}


def provider_name(value: Any) -> str:
    """OTel's current provider name for any family's spelling ("Anthropic", "MistralAI", "az.ai.openai"…)."""
    if not isinstance(value, str):
        return ""
    name = value.strip().lower()
    return _PROVIDER_ALIASES.get(name, name)


# No call has this many tokens: a larger figure is junk, and summing a few of them into a run's totals
# would overflow its 64-bit columns (failing every later batch of the run).
MAX_TOKENS = 2**40


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str):
        value = value.strip()
        # isdigit() alone accepts "²", which int() refuses.
        value = int(value) if value.isascii() and value.isdigit() and len(value) <= 13 else None
    if isinstance(value, int) and 0 <= value <= MAX_TOKENS:
        return value
    return None


def _first(attributes: dict, keys: tuple[str, ...]) -> int | None:
    """The figure of the first key that holds a count."""
    for key in keys:
        number = _count(attributes.get(key))
        if number is not None:
            return number
    return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _input_excludes_cache(scope_name: str, scope_version: str) -> bool:
    """Emitters known to report Anthropic/Bedrock's exclusive input figure as is (conventions.md §6)."""
    name = scope_name.lower()
    version = _version(scope_version)
    if name.startswith("openinference.instrumentation.bedrock"):
        return True
    if name.startswith("openinference.instrumentation.anthropic") and version and version < (0, 1, 14):
        return True
    if name.startswith("opentelemetry.instrumentation.anthropic") and version and version < (0, 33, 4):
        return True
    return False


def _logfire_raw(attributes: dict) -> dict:
    """Logfire keeps the provider's usage object only as JSON in gen_ai.usage.raw."""
    raw = attributes.get(semconv.LOGFIRE_RAW_USAGE)
    if isinstance(raw, str):
        try:
            raw = otlp.json_value(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


def normalise_usage(
    attributes: dict, provider: str = "", scope_name: str = "", scope_version: str = ""
) -> Usage:
    """The call's usage split from a span's attributes, following the emitter's semantics."""
    raw = {
        key: value
        for key, value in attributes.items()
        if key.startswith(semconv.USAGE_PREFIXES) and not isinstance(value, (dict, list))
    }
    notes: list[str] = []
    reported_input = _first(attributes, semconv.INPUT_TOKENS)
    cache_read = _first(attributes, semconv.CACHE_READ_TOKENS)
    cache_write = _first(attributes, semconv.CACHE_WRITE_TOKENS)
    output = _first(attributes, semconv.OUTPUT_TOKENS)
    reasoning = _first(attributes, semconv.REASONING_TOKENS)

    logfire = _logfire_raw(attributes)
    if logfire and cache_read is None:
        cache_read = _count(logfire.get("cache_read_input_tokens"))
        if cache_read is None:
            cache_read = _count((logfire.get("prompt_tokens_details") or {}).get("cached_tokens"))
    if logfire and cache_write is None:
        cache_write = _count(logfire.get("cache_creation_input_tokens"))

    if reported_input is not None and scope_name.lower().startswith(_OMITS_ZERO_FIGURES):
        if cache_read is None:
            cache_read = 0
        if cache_write is None:
            cache_write = 0

    if cache_write is None and cache_read is not None and provider in _NO_CACHE_WRITES:
        cache_write = 0
        notes.append(f"cache_write taken as 0: {provider} reports no cache writes")

    exclusive = _input_excludes_cache(scope_name, scope_version)
    if exclusive:
        notes.append(f"{scope_name} {scope_version} reports input without cached tokens")
    elif reported_input is not None and (cache_read or 0) + (cache_write or 0) > reported_input:
        # Cache figures larger than the whole input: this emitter's input figure cannot include them.
        exclusive = True
        notes.append("the reported input is smaller than its cached part: read as excluding cached tokens")

    uncached = prompt_total = None
    if reported_input is not None:
        if exclusive:
            uncached = reported_input
            if cache_read is not None and cache_write is not None:
                prompt_total = reported_input + cache_read + cache_write
        else:
            prompt_total = reported_input
            if cache_read is not None and cache_write is not None:
                uncached = reported_input - cache_read - cache_write
    return Usage(
        uncached=uncached,
        cache_write=cache_write,
        cache_read=cache_read,
        output=output,
        reasoning=reasoning,
        prompt_total=prompt_total,
        raw=raw,
        notes=tuple(notes),
    )
