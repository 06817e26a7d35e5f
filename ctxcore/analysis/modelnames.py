"""Tolerant model-name matching: a dated, prefixed or aliased name finds its table entry."""

import re
from collections.abc import Iterable
from functools import lru_cache

# Vendor and platform prefixes: "anthropic/claude-…", Bedrock "us.anthropic.claude-…", "models/gemini-…".
_PREFIX = re.compile(r"^(?:[a-z0-9_.-]+/)+|^(?:(?:us|eu|apac|global)\.)?(?:anthropic|openai)\.")
# Snapshot and deployment suffixes: "-20250929", "-2025-04-14", "@20250929", "-v1:0", "-latest".
_SUFFIX = re.compile(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-v\d+(?::\d+)?|-latest)+$")
# A remainder starting with one of these names another model with other prices ("gpt-4o" vs
# "gpt-4o-mini"), or a newer version ("claude-opus-4" vs "claude-opus-4-7"): never a variant.
_OTHER_MODEL = re.compile(r"^-(?:\d|mini|nano|pro|turbo|audio|realtime|search|transcribe|tts|image|deep)")


@lru_cache(maxsize=4096)  # a run names a few models, on every call
def normalise(name: str) -> str:
    """Lower case, without vendor prefix or snapshot suffix; "claude-sonnet-4.5" reads "claude-sonnet-4-5"."""
    name = _PREFIX.sub("", name.strip().lower())
    name = _SUFFIX.sub("", name)
    if name.startswith("claude-"):
        name = re.sub(r"(?<=\d)\.(?=\d)", "-", name)
    return name


def match(name: str, keys: Iterable[str]) -> str | None:
    """The table key for a model name: exact after normalising, else the longest key it extends."""
    return _match(name, tuple(keys))


@lru_cache(maxsize=4096)
def _match(name: str, keys: tuple[str, ...]) -> str | None:
    name = normalise(name)
    if name in keys:
        return name
    candidates = [
        key
        for key in keys
        if name.startswith(key) and name[len(key)] in "-:@" and not _OTHER_MODEL.match(name[len(key) :])
    ]
    return max(candidates, key=len, default=None)
