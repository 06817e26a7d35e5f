"""Token usage of a model call, normalised once, at ingest. No Django here.

Every family reports input tokens differently: OTel (v1.40+), OpenInference and OpenLLMetry report an
input figure that *includes* cached tokens; a few emitters copy Anthropic's or Bedrock's exclusive
``input_tokens`` verbatim. ctxview stores the split: ``uncached + cache_write + cache_read =
prompt_total``. A figure the source did not report is None (unknown), never 0 — unless the
provider or the instrumentation is known to leave that figure out when it is 0
(``ingest/families/providers.py``, the one table of what each instrumentation reports).
"""

from ctxcore.analysis import limits
from ctxcore.vocabulary import MAX_TOKENS, Usage, count_of
from ingest import families, semconv
from ingest.families import providers
from ingest.families.providers import CACHE_READ, CACHE_WRITE, REASONING, provider_name

__all__ = ["MAX_TOKENS", "normalise_usage", "provider_name"]


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

    rows = providers.instrumentations(scope_name, scope_version, provider)
    # An absent figure that the instrumentation leaves out when 0 is 0, where the figure it belongs
    # beside (input for the cache, output for reasoning) was reported.
    zeros_left_out = frozenset().union(*(row.zeros_left_out for row in rows))
    if any(family.omits_zero_figures(scope_name) for family in families.FAMILIES):
        zeros_left_out |= {CACHE_READ, CACHE_WRITE}
    taken_as_zero = []
    if reported_input is not None:
        if cache_read is None and CACHE_READ in zeros_left_out:
            cache_read = 0
            taken_as_zero.append(CACHE_READ)
        if cache_write is None and CACHE_WRITE in zeros_left_out:
            cache_write = 0
            taken_as_zero.append(CACHE_WRITE)
    if output is not None and reasoning is None and REASONING in zeros_left_out:
        reasoning = 0
        taken_as_zero.append(REASONING)
    if taken_as_zero:
        notes.append(f"{', '.join(taken_as_zero)} taken as 0: {scope_name} leaves zero figures out")

    dropped = frozenset().union(*(row.dropped for row in rows))
    provider_row = providers.provider(provider)
    writes_reported = provider_row is None or provider_row.cache_writes
    if cache_write is None and cache_read is not None and not writes_reported and CACHE_WRITE not in dropped:
        cache_write = 0
        notes.append(f"cache_write taken as 0: {provider} reports no cache writes")

    extra = max((row.streamed_output_extra for row in rows), default=0)
    if extra and output is not None and output >= extra and _marked_streamed(attributes):
        output -= extra
        notes.append(
            f"output {extra:,} lower than reported: {scope_name} {scope_version} counts a streamed call's "
            "first event's output too"
        )

    exclusive = any(row.input_excludes_cache for row in rows) or any(
        family.input_excludes_cache(scope_name, scope_version) for family in families.FAMILIES
    )
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
