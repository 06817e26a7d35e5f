"""List prices per model (USD per million tokens), each figure with where it comes from.

The table seeds the user-editable price table: ``table_from_rows`` builds the same shape from stored
rows. Cache writes: Anthropic charges 1.25x input for a 5-minute write and 2x for a 1-hour write;
OpenAI has no write charge, so a written prefix costs plain input (its write price is its input price).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ctxcore.analysis import modelnames

FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float
    source: Mapping[str, str] = field(default_factory=dict)  # field name -> where the figure comes from

    def to_dict(self) -> dict:
        """The price as plain data, sources included."""
        return {**{name: getattr(self, name) for name in FIELDS}, "source": dict(self.source)}


# --- Sources -------------------------------------------------------------------------------------
# Checked on 2026-11-30 through stored copies of the pages named; re-check before relying on a bill.
_ANTHROPIC = (
    "Anthropic, platform.claude.com/docs/en/docs/about-claude/pricing, 'Model pricing' table "
    "(base input, 5m cache writes, 1h cache writes, cache hits, output)"
)
_ANTHROPIC_NEW = (
    "Anthropic, platform.claude.com/docs/en/about-claude/pricing, 'Model pricing' table "
    "(a later copy of the same page, listing Opus 4.7 and 4.8)"
)
_OPENAI_WRITE = (
    "no separate charge: OpenAI caches automatically with 'no additional fees' "
    "(developers.openai.com/api/docs/guides/prompt-caching), so a written prefix is billed as input"
)


def _openai_model_page(model: str) -> str:
    return f"OpenAI, developers.openai.com/api/docs/models/{model}, 'Text tokens' pricing"


def _secondary(model: str) -> str:
    return (
        f"NOT verified on an OpenAI page: pydantic/genai-prices prices/providers/openai.yml entry {model!r} "
        "(its pricing_urls are OpenAI's pricing pages); OpenAI's own page could not be checked here"
    )


def _anthropic(
    input_: float, write_5m: float, write_1h: float, read: float, output: float, source: str
) -> Price:
    return Price(input_, output, write_5m, write_1h, read, dict.fromkeys(FIELDS, source))


def _openai(input_: float, read: float, output: float, input_source: str, rest_source: str = "") -> Price:
    rest_source = rest_source or input_source
    source = {
        "input": input_source,
        "output": rest_source,
        "cache_read": rest_source,
        "cache_write_5m": _OPENAI_WRITE,
        "cache_write_1h": _OPENAI_WRITE,
    }
    return Price(input_, output, input_, input_, read, source)


PRICES: dict[str, Price] = {
    # Anthropic: input, 5m write, 1h write, cache read, output.
    "claude-opus-4-8": _anthropic(5, 6.25, 10, 0.50, 25, _ANTHROPIC_NEW),
    "claude-opus-4-7": _anthropic(5, 6.25, 10, 0.50, 25, _ANTHROPIC_NEW),
    "claude-opus-4-6": _anthropic(5, 6.25, 10, 0.50, 25, _ANTHROPIC),
    "claude-opus-4-5": _anthropic(5, 6.25, 10, 0.50, 25, _ANTHROPIC),
    "claude-opus-4-1": _anthropic(15, 18.75, 30, 1.50, 75, _ANTHROPIC),
    "claude-opus-4": _anthropic(15, 18.75, 30, 1.50, 75, _ANTHROPIC),
    "claude-sonnet-4-6": _anthropic(3, 3.75, 6, 0.30, 15, _ANTHROPIC),
    "claude-sonnet-4-5": _anthropic(3, 3.75, 6, 0.30, 15, _ANTHROPIC),
    "claude-sonnet-4": _anthropic(3, 3.75, 6, 0.30, 15, _ANTHROPIC),
    "claude-3-7-sonnet": _anthropic(3, 3.75, 6, 0.30, 15, _ANTHROPIC),
    "claude-haiku-4-5": _anthropic(1, 1.25, 2, 0.10, 5, _ANTHROPIC),
    "claude-3-5-haiku": _anthropic(0.80, 1, 1.6, 0.08, 4, _ANTHROPIC),
    # OpenAI: input, cached input, output.
    "gpt-5": _openai(
        1.25,
        0.125,
        10,
        "OpenAI, developers.openai.com/api/docs/models/gpt-5-codex, 'Quick comparison' (GPT-5 input)",
        _secondary("gpt-5") + "; the same figures are OpenAI's for GPT-5-Codex on that page",
    ),
    "gpt-5-mini": _openai(0.25, 0.025, 2, _openai_model_page("gpt-5-mini")),
    "gpt-5-nano": _openai(0.05, 0.005, 0.40, _openai_model_page("gpt-5-nano")),
    "gpt-5.1": _openai(1.25, 0.125, 10, _secondary("gpt-5.1")),
    "gpt-4.1": _openai(2, 0.50, 8, _secondary("gpt-4.1")),
    "gpt-4.1-mini": _openai(0.40, 0.10, 1.60, _secondary("gpt-4.1-mini")),
    "gpt-4.1-nano": _openai(0.10, 0.025, 0.40, _secondary("gpt-4.1-nano")),
    "gpt-4o": _openai(2.50, 1.25, 10, _secondary("gpt-4o")),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.60, _secondary("gpt-4o-mini")),
    "o1": _openai(15, 7.50, 60, _secondary("o1")),
    "o3": _openai(2, 0.50, 8, _secondary("o3") + " (price from 2025-06-10)"),
    "o3-mini": _openai(1.10, 0.55, 4.40, _secondary("o3-mini")),
    "o4-mini": _openai(1.10, 0.275, 4.40, _secondary("o4-mini")),
}


def price_for(model: str, table: Mapping[str, Price] | None = None) -> Price | None:
    """The price of a model by tolerant name match ("claude-sonnet-4-5-20250929"), or None."""
    table = PRICES if table is None else table
    key = modelnames.match(model, table) if model else None
    return table[key] if key is not None else None


def table_from_rows(rows: Iterable[Mapping]) -> dict[str, Price]:
    """A price table from stored rows ``{"model", "input", "output", "cache_write_5m", ...}``."""
    table = {}
    for row in rows:
        # An optional rate stored as null (an older ctxview accepted it) is a rate not given.
        given = {name: value for name, value in row.items() if value is not None}
        input_ = float(given["input"])
        table[modelnames.normalise(str(given["model"]))] = Price(
            input=input_,
            output=float(given["output"]),
            cache_write_5m=float(given.get("cache_write_5m", input_)),
            cache_write_1h=float(given.get("cache_write_1h", given.get("cache_write_5m", input_))),
            cache_read=float(given.get("cache_read", input_)),
            source=dict(row.get("source") or dict.fromkeys(FIELDS, "edited by a user")),
        )
    return table
