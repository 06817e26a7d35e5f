"""Token usage of a model call, normalised once, at ingest. No Django here.

Every family reports input tokens differently: OTel (v1.40+), OpenInference and OpenLLMetry report an
input figure that *includes* cached tokens; a few emitters copy Anthropic's or Bedrock's exclusive
``input_tokens`` verbatim. ctxview stores the split: ``uncached + cache_write + cache_read =
prompt_total``. A figure the source did not report is None (unknown), never 0.
"""

from typing import Any

from ctxcore.vocabulary import Usage
from ingest import families, semconv

# Providers whose prompt caching has no separate write charge: a reported cache read with no write
# figure means nothing was written (OpenAI-style automatic caching; Gemini writes through another API).
_NO_CACHE_WRITES = frozenset(
    {"openai", "azure.ai.openai", "azure.ai.inference", "gcp.gen_ai", "deepseek", "x_ai"}
)

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
    return _first_count(attributes.get(key) for key in keys)


def _first_count(values) -> int | None:
    for value in values:
        number = _count(value)
        if number is not None:
            return number
    return None


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
    reported_input = _first(attributes, families.INPUT_TOKENS)
    cache_read = _first(attributes, families.CACHE_READ_TOKENS)
    cache_write = _first(attributes, families.CACHE_WRITE_TOKENS)
    output = _first(attributes, families.OUTPUT_TOKENS)
    reasoning = _first(attributes, families.REASONING_TOKENS)

    for family in families.FAMILIES:
        if family.usage_fallback is not None and (cache_read is None or cache_write is None):
            found = family.usage_fallback(attributes)
            if cache_read is None:
                cache_read = _first_count(found.get("cache_read", ()))
            if cache_write is None:
                cache_write = _first_count(found.get("cache_write", ()))

    omits_zero_figures = any(family.omits_zero_figures(scope_name) for family in families.FAMILIES)
    if reported_input is not None and omits_zero_figures:
        if cache_read is None:
            cache_read = 0
        if cache_write is None:
            cache_write = 0

    if cache_write is None and cache_read is not None and provider in _NO_CACHE_WRITES:
        cache_write = 0
        notes.append(f"cache_write taken as 0: {provider} reports no cache writes")

    exclusive = any(family.input_excludes_cache(scope_name, scope_version) for family in families.FAMILIES)
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
