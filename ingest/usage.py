"""Token usage of a model call, normalised once, at ingest. No Django here.

Every family reports input tokens differently: OTel (v1.40+), OpenInference and OpenLLMetry report an
input figure that *includes* cached tokens; a few emitters copy Anthropic's or Bedrock's exclusive
``input_tokens`` verbatim. ctxview stores the split: ``uncached + cache_write + cache_read =
prompt_total``. A figure the source did not report is None (unknown), never 0 — unless the
provider or the instrumentation is known to leave that figure out when it is 0
(``ingest/families/providers.py``, the one table of what each instrumentation reports).
"""

from dataclasses import dataclass

from ctxcore.analysis import limits
from ctxcore.vocabulary import MAX_TOKENS, Usage, count_of
from ingest import families, semconv
from ingest.families import providers
from ingest.families.providers import CACHE_READ, CACHE_WRITE, REASONING, provider_name

__all__ = ["MAX_TOKENS", "normalise_usage", "provider_name"]

Rows = tuple[providers.Instrumentation, ...]  # what the providers table holds for a span


def _first(attributes: dict, keys: tuple[str, ...]) -> int | None:
    """The figure of the first key that holds a count."""
    return _first_count(attributes.get(key) for key in keys)


def _first_count(values) -> int | None:
    for value in values:
        number = count_of(value)
        if number is not None:
            return number
    return None


def _marked_streamed(attributes: dict) -> bool:
    return any(attributes.get(key) is True or attributes.get(key) == "true" for key in semconv.IS_STREAMING)


def normalise_usage(
    attributes: dict, provider: str = "", scope_name: str = "", scope_version: str = ""
) -> Usage:
    """The call's usage split from a span's attributes, following the emitter's semantics."""
    rows = providers.instrumentations(scope_name, scope_version, provider)
    figures = _reported(attributes)
    notes = [
        *_zeros_left_out(figures, rows, scope_name),
        *_writes_never_reported(figures, rows, provider),
        *_streamed_output_extra(figures, rows, attributes, scope_name, scope_version),
    ]
    exclusive, why = _input_excludes_cache(figures, rows, scope_name, scope_version)
    notes += why
    uncached = prompt_total = None
    if figures.input is not None:
        cached = (
            figures.cache_read + figures.cache_write
            if figures.cache_read is not None and figures.cache_write is not None
            else None
        )
        if exclusive:
            uncached = figures.input
            prompt_total = figures.input + cached if cached is not None else None
        else:
            prompt_total = figures.input
            uncached = figures.input - cached if cached is not None else None
    return Usage(
        uncached=uncached,
        cache_write=figures.cache_write,
        cache_read=figures.cache_read,
        output=figures.output,
        reasoning=figures.reasoning,
        prompt_total=prompt_total,
        raw=_raw_figures(attributes),
        notes=tuple(notes),
    )


def _raw_figures(attributes: dict) -> dict:
    """Every usage figure the span carried, as it carried it."""
    raw = {
        key: value
        for key, value in attributes.items()
        if key.startswith(semconv.USAGE_PREFIXES) and not isinstance(value, (dict, list))
    }
    for family in families.FAMILIES:
        if family.usage_details is not None:
            for key, value in family.usage_details(attributes).items():
                raw.setdefault(key, value)
    # What was done to the context before the model saw it: the cache analysis reads it back (a break
    # that follows is the edit's, not a rewritten history).
    raw.update(limits.context_edit_figures(families.context_edits(attributes)))
    return raw


@dataclass
class _Figures:
    """The figures as the span reported them; None where it said nothing."""

    input: int | None
    cache_read: int | None
    cache_write: int | None
    output: int | None
    reasoning: int | None


def _reported(attributes: dict) -> _Figures:
    figures = _Figures(
        _first(attributes, families.INPUT_TOKENS),
        _first(attributes, families.CACHE_READ_TOKENS),
        _first(attributes, families.CACHE_WRITE_TOKENS),
        _first(attributes, families.OUTPUT_TOKENS),
        _first(attributes, families.REASONING_TOKENS),
    )
    for family in families.FAMILIES:
        if family.usage_fallback is not None and (figures.cache_read is None or figures.cache_write is None):
            found = family.usage_fallback(attributes)
            if figures.cache_read is None:
                figures.cache_read = _first_count(found.get("cache_read", ()))
            if figures.cache_write is None:
                figures.cache_write = _first_count(found.get("cache_write", ()))
    return figures


def _zeros_left_out(figures: _Figures, rows: Rows, scope_name: str) -> list[str]:
    """An absent figure that the instrumentation leaves out when 0 is 0, where the figure it belongs
    beside (input for the cache, output for reasoning) was reported."""
    zeros_left_out = frozenset().union(*(row.zeros_left_out for row in rows))
    if any(family.omits_zero_figures(scope_name) for family in families.FAMILIES):
        zeros_left_out |= {CACHE_READ, CACHE_WRITE}
    taken_as_zero = []
    if figures.input is not None:
        if figures.cache_read is None and CACHE_READ in zeros_left_out:
            figures.cache_read = 0
            taken_as_zero.append(CACHE_READ)
        if figures.cache_write is None and CACHE_WRITE in zeros_left_out:
            figures.cache_write = 0
            taken_as_zero.append(CACHE_WRITE)
    if figures.output is not None and figures.reasoning is None and REASONING in zeros_left_out:
        figures.reasoning = 0
        taken_as_zero.append(REASONING)
    if taken_as_zero:
        return [f"{', '.join(taken_as_zero)} taken as 0: {scope_name} leaves zero figures out"]
    return []


def _writes_never_reported(figures: _Figures, rows: Rows, provider: str) -> list[str]:
    """A provider that reports no cache writes wrote 0 where it reported a read."""
    dropped = frozenset().union(*(row.dropped for row in rows))
    provider_row = providers.provider(provider)
    writes_reported = provider_row is None or provider_row.cache_writes
    if (
        figures.cache_write is None
        and figures.cache_read is not None
        and not writes_reported
        and CACHE_WRITE not in dropped
    ):
        figures.cache_write = 0
        return [f"cache_write taken as 0: {provider} reports no cache writes"]
    return []


def _streamed_output_extra(
    figures: _Figures, rows: Rows, attributes: dict, scope_name: str, scope_version: str
) -> list[str]:
    extra = max((row.streamed_output_extra for row in rows), default=0)
    if extra and figures.output is not None and figures.output >= extra and _marked_streamed(attributes):
        figures.output -= extra
        return [
            f"output {extra:,} lower than reported: {scope_name} {scope_version} counts a streamed call's "
            "first event's output too"
        ]
    return []


def _input_excludes_cache(
    figures: _Figures, rows: Rows, scope_name: str, scope_version: str
) -> tuple[bool, list[str]]:
    """Whether the reported input leaves the cached tokens out, with why; else it includes them."""
    if any(row.input_excludes_cache for row in rows) or any(
        family.input_excludes_cache(scope_name, scope_version) for family in families.FAMILIES
    ):
        return True, [f"{scope_name} {scope_version} reports input without cached tokens"]
    if figures.input is not None and (figures.cache_read or 0) + (figures.cache_write or 0) > figures.input:
        # Cache figures larger than the whole input: this emitter's input figure cannot include them.
        return True, ["the reported input is smaller than its cached part: read as excluding cached tokens"]
    return False, []
