"""Prompt-cache rules per provider and model: minimum cacheable prefix, lifetime, automatic caching.

Minimum cacheable prefix, in tokens (a shorter prefix is never cached, and no error says so):
- Anthropic prompt-caching docs, "Cache limitations" (as quoted in anthropics/anthropic-sdk-python#1194):
  4096 for Claude Opus 4.6, Opus 4.5 and Haiku 4.5; 2048 for Claude Haiku 3.5 and Haiku 3; 1024 for
  Sonnet 4.6, Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7. Models not listed: 1024.
  The newest models go lower: 512 for Claude Opus 5, Fable 5 and Mythos 5 (and 2048 for Opus 4.7), as
  the same "Cache limitations" list reads in 2026, quoted in "Claude's prompt cache fails silently below
  1,024 tokens" (dev.to/creeta, from news.creeta.com); the provider's page itself was not readable here.
- OpenAI prompt-caching guide (developers.openai.com/api/docs/guides/prompt-caching): "enabled
  automatically for prompts that are 1024 tokens or longer", for every model.
The table is a hint for calls that report no cache figures: a read or write the provider reports says it
cached, whatever our count of the prefix (``cache.analyse_cache``).
Lifetime: 5 minutes from last use by default (both providers); 1 hour with Anthropic's 1-hour cache.
"""

import json
from collections.abc import Mapping
from typing import Any

from ctxcore.analysis import modelnames

DEFAULT_MINIMUM = 1024
MINIMUM_CACHEABLE = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "claude-opus-4-7": 2048,
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
}
TTL_NS = 5 * 60 * 10**9
TTL_1H_NS = 60 * 60 * 10**9

# Providers that cache every long enough prompt without being asked (and charge nothing to write):
# a call to them has cached its prefix even when it reports no cache figures.
AUTOMATIC_CACHING = frozenset({"openai", "azure.ai.openai", "azure.ai.inference", "deepseek", "x_ai"})

# What the provider or the framework did to a call's context before the model saw it (Anthropic's applied
# context edits, a compaction), kept among the call's reported usage by ingest as
# "<CONTEXT_EDITS>.<n>.type" and "<CONTEXT_EDITS>.<n>.cleared_<what>" (a count).
CONTEXT_EDITS = "ctxview.context_edits"
COMPACTED = "compacted"  # the edit type of a compaction (``gen_ai.conversation.compacted``)
MAX_CONTEXT_EDITS = 20

# Anthropic's cache diagnosis (cache-diagnosis beta) names the part of the request that diverged.
# The parts of the request a provider's cache-miss reason names (Anthropic's ``cache_miss_reason``
# types, OpenAI's ``prompt_cache_diagnostics`` reasons); one not here compares nothing we can check.
PROVIDER_AREAS: dict[str, frozenset[str]] = {
    "model_changed": frozenset({"model"}),
    "system_changed": frozenset({"system"}),
    "tools_changed": frozenset({"tools"}),
    "messages_changed": frozenset({"history"}),
    "input_changed": frozenset({"system", "history"}),  # OpenAI: instructions and input are one input
}


def minimum_cacheable(model: str) -> int:
    """The shortest prefix, in tokens, the model's provider will cache."""
    key = modelnames.match(model, MINIMUM_CACHEABLE) if model else None
    return MINIMUM_CACHEABLE[key] if key else DEFAULT_MINIMUM


def uses_one_hour_cache(usage_raw: Mapping[str, Any]) -> bool:
    """Whether the call wrote to Anthropic's 1-hour cache (an ``…ephemeral_1h…`` usage figure above 0)."""
    return one_hour_tokens(usage_raw) > 0


def one_hour_tokens(usage_raw: Mapping[str, Any]) -> int:
    """Tokens written to the 1-hour cache, from an ``…ephemeral_1h…`` usage attribute (0 when absent)."""
    for key, value in usage_raw.items():
        if "ephemeral_1h" in key and isinstance(value, (int, float, str)) and not isinstance(value, bool):
            try:
                return max(0, int(float(value)))
            except ValueError:
                continue
    return 0


def provider_diagnosis(usage_raw: Mapping[str, Any]) -> str | None:
    """The provider's own cache-miss reason (e.g. Anthropic's ``cache_miss_reason``), when reported."""
    for key, value in sorted(usage_raw.items()):
        if "cache_miss" not in key or isinstance(value, (bool, int, float)):
            continue
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value.strip() or None
        if isinstance(value, Mapping):
            value = value.get("type") or value.get("reason")
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def context_edit_figures(edits: list[Mapping[str, Any]]) -> dict[str, str | int]:
    """The reported-usage entries that carry a call's context edits (``context_edits`` reads them back)."""
    figures: dict[str, str | int] = {}
    for index, edit in enumerate(edits[:MAX_CONTEXT_EDITS]):
        for key, value in edit.items():
            figures[f"{CONTEXT_EDITS}.{index}.{key}"] = value
    return figures


def context_edits(usage_raw: Mapping[str, Any]) -> list[dict]:
    """The context edits applied to the call before the model saw it, in order: each ``{"type": …,
    "cleared_…": count}``; empty when none was reported."""
    found: dict[int, dict] = {}
    prefix = CONTEXT_EDITS + "."
    for key, value in usage_raw.items():
        if not key.startswith(prefix):
            continue
        index, _, name = key.removeprefix(prefix).partition(".")
        if not index.isdigit() or int(index) >= MAX_CONTEXT_EDITS or not name:
            continue
        if name == "type" and isinstance(value, str):
            found.setdefault(int(index), {})["type"] = value
        elif name.startswith("cleared_") and isinstance(value, int) and not isinstance(value, bool):
            found.setdefault(int(index), {})[name] = value
    return [found[index] for index in sorted(found) if "type" in found[index]]


def missed_tokens(usage_raw: Mapping[str, Any]) -> int | None:
    """The tokens the provider says this call could have read from its cache but did not (Anthropic's
    ``cache_miss_reason.cache_missed_input_tokens``), when reported."""
    for key, value in sorted(usage_raw.items()):
        if not key.endswith("cache_missed_input_tokens") or isinstance(value, bool):
            continue
        if isinstance(value, int):
            return max(value, 0)
    return None
