"""Logfire's OpenAI and Anthropic integrations: the provider's usage object kept only as JSON in
``gen_ai.usage.raw``, so cache figures are read from it when no attribute carries them."""

from ingest import storable
from ingest.families.base import Family

RAW_USAGE = "gen_ai.usage.raw"


def usage_fallback(attributes: dict) -> dict[str, tuple]:
    """Candidate cache figures from the raw usage object, by figure: Anthropic's names, then OpenAI's."""
    raw = attributes.get(RAW_USAGE)
    if isinstance(raw, str):
        try:
            raw = storable.json_value(raw)
        except ValueError:
            return {}
    if not isinstance(raw, dict):
        return {}
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return {
        "cache_read": (raw.get("cache_read_input_tokens"), cached),
        "cache_write": (raw.get("cache_creation_input_tokens"),),
    }


FAMILY = Family(name="logfire", usage_fallback=usage_fallback)
