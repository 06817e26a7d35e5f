"""Which provider each spelling means, what its figures include, and what each instrumentation leaves
out: the one table usage normalisation and finish reasons follow. No Django here.

``PROVIDERS``: one row per provider (OTel's ``gen_ai.provider.name``), with every family's spelling of it,
whether its API reports cache writes per request, and whether it says "stop" for a tool-call answer.
``INSTRUMENTATIONS``: one row per instrumentation (by its OTel scope name, for some providers, for some
versions) whose figures or finish reasons need reading with care. A row that names a scenario is
checked against that recording of the real instrumentation (``tests/instrumented/``,
``tests/ingest/test_providers.py``); the others (version bounds, Bedrock) come from the
instrumentations' sources (../shared/docs/conventions.md §2, §3, §6). The README's "Known to work"
table says the same for users.
"""

from dataclasses import dataclass
from functools import lru_cache

from ingest.families.base import version_tuple

CACHE_READ = "cache_read"
CACHE_WRITE = "cache_write"
REASONING = "reasoning"

# How an instrumentation reports finish reasons. Only STOP_FOR_TOOL_CALLS changes how they are read;
# the others say where ingest finds them (it looks in every place in turn: the span's attribute, then
# the family's readers), for the README and the tests that check each row against its recording.
REPORTED = "reported"  # on the span, as the OTel values or the provider's words (mapped below)
ON_MESSAGES = "on_messages"  # only inside the output messages (``finish_reason`` of each)
STOP_FOR_TOOL_CALLS = "stop_for_tool_calls"  # "stop" for every completed answer, tool calls too
NONE = "none"  # not at all: derived from the response object the span keeps (OpenInference)


@dataclass(frozen=True)
class Provider:
    name: str  # OTel's gen_ai.provider.name
    spellings: tuple[str, ...] = ()  # other conventions' and families' names for it (lower case)
    # What its API's input figure includes; instrumentations convert (INSTRUMENTATIONS says where not).
    input: str = "input tokens include cached tokens"
    # False: the API has no per-request cache write figure, so a cache read reported without a write
    # means nothing was written (OpenAI-style automatic caching; Gemini writes through another API).
    cache_writes: bool = True
    # The API says "stop" for an answer that asks for tools (Gemini's STOP), so tool calls decide.
    stop_for_tool_calls: bool = False


_OPENAI_INPUT = "prompt_tokens / input_tokens include cached_tokens (and cache_write_tokens, since 2026-07)"
_GEMINI_INPUT = (
    "promptTokenCount includes the cached content; cachedContentTokenCount and thoughtsTokenCount are "
    "left out when 0; explicit caches are written through another API"
)

PROVIDERS: tuple[Provider, ...] = (
    Provider(
        "anthropic",
        input="input_tokens excludes cache reads and writes; instrumentations add them back (except below)",
    ),
    Provider("openai", input=_OPENAI_INPUT, cache_writes=False),
    Provider("azure.ai.openai", ("az.ai.openai", "azure"), _OPENAI_INPUT, cache_writes=False),
    Provider("azure.ai.inference", ("az.ai.inference",), cache_writes=False),
    Provider("gcp.gemini", ("gemini",), _GEMINI_INPUT, cache_writes=False, stop_for_tool_calls=True),
    Provider(
        "gcp.vertex_ai",
        ("vertex_ai", "vertexai"),
        _GEMINI_INPUT,
        cache_writes=False,
        stop_for_tool_calls=True,
    ),
    Provider("gcp.gen_ai", ("google",), _GEMINI_INPUT, cache_writes=False, stop_for_tool_calls=True),
    Provider(
        "aws.bedrock",
        ("aws", "amazon", "bedrock"),
        "Converse inputTokens excludes cache reads and writes",
    ),
    Provider("deepseek", cache_writes=False),
    Provider("x_ai", ("xai",), cache_writes=False),
    Provider("mistral_ai", ("mistralai",)),
    Provider("moonshot_ai", ("moonshot",)),
    Provider("cohere"),
    Provider("groq"),
    Provider("perplexity"),
    Provider("ibm.watsonx.ai"),
)

_BY_SPELLING = {spelling: row for row in PROVIDERS for spelling in (row.name, *row.spellings)}


def provider_name(value: object) -> str:
    """OTel's current provider name for any family's spelling ("Anthropic", "gemini", "az.ai.openai"…)."""
    if not isinstance(value, str):
        return ""
    name = value.strip().lower()
    row = _BY_SPELLING.get(name)
    return row.name if row else name


def provider(name: str) -> Provider | None:
    """The row of a provider name (as ``provider_name`` gives it); None for a provider not listed."""
    return _BY_SPELLING.get(name)


@dataclass(frozen=True)
class Instrumentation:
    family: str  # the family module that reads its spans
    label: str  # the instrumentation, as its users know it
    scopes: tuple[str, ...]  # its OTel scope names (a scope "a.b" also matches "a.b.c")
    providers: frozenset[str] = frozenset()  # OTel provider names the row holds for; empty: any
    since: tuple[int, ...] = ()  # the first scope version the row holds for; empty: every version
    before: tuple[int, ...] = ()  # the first scope version it no longer holds for
    # Figures it leaves out when they are 0: absent beside a reported input (cache figures) or output
    # (reasoning), they are 0, not unknown.
    zeros_left_out: frozenset[str] = frozenset()
    # Figures it never passes on: absent, they are unknown even where the provider's rule says 0.
    dropped: frozenset[str] = frozenset()
    input_excludes_cache: bool = False  # its input figure leaves cached tokens out (conventions §6)
    finish_reasons: str = REPORTED
    # Tokens its output figure counts too many on a call it marks streamed (``gen_ai.is_streaming``).
    streamed_output_extra: int = 0
    scenario: str = ""  # the recording in tests/instrumented/ that shows it ("" for version rules)
    # Or a recording in tests/data/recordings/ made in a venv of its own, checked by a test of its own.
    recording: str = ""

    def holds_for(self, scope_name: str, scope_version: str, provider: str) -> bool:
        scope = scope_name.lower()
        if not any(scope == name or scope.startswith(name + ".") for name in self.scopes):
            return False
        if self.providers and provider not in self.providers:
            return False
        if self.since or self.before:
            version = version_tuple(scope_version)
            if not version or (self.since and version < self.since):
                return False
            if self.before and version >= self.before:
                return False
        return True


_GOOGLE = frozenset({"gcp.gemini", "gcp.vertex_ai", "gcp.gen_ai"})
_OPENAI = frozenset({"openai", "azure.ai.openai"})

INSTRUMENTATIONS: tuple[Instrumentation, ...] = (
    Instrumentation(
        "openinference",
        "openinference-instrumentation-anthropic",
        ("openinference.instrumentation.anthropic",),
        # Only truthy cache figures are set. Before 1.1.1 its streaming path set none at all, so an
        # absent figure there may be unknown rather than 0.
        since=(1, 1, 1),
        zeros_left_out=frozenset({CACHE_READ, CACHE_WRITE}),
        scenario="openinference-anthropic-zerocache",
    ),
    Instrumentation(
        "openinference",
        "openinference-instrumentation-anthropic",
        ("openinference.instrumentation.anthropic",),
        before=(0, 1, 14),
        input_excludes_cache=True,
    ),
    Instrumentation(
        "openinference",
        "openinference-instrumentation-bedrock (Converse)",
        ("openinference.instrumentation.bedrock",),
        # inputTokens excludes the cache; 0.1.60 began adding cache reads and writes to the prompt figure.
        before=(0, 1, 60),
        input_excludes_cache=True,
    ),
    Instrumentation(
        "openinference",
        "openinference-instrumentation-openai (Responses API)",
        ("openinference.instrumentation.openai",),
        finish_reasons=NONE,
        scenario="openinference-openai-responses",
    ),
    Instrumentation(
        "openinference",
        "openinference-instrumentation-openai-agents",
        ("openinference.instrumentation.openai_agents",),
        finish_reasons=STOP_FOR_TOOL_CALLS,
        scenario="openai-agents-handoff",
    ),
    Instrumentation(
        "otel-genai",
        "opentelemetry-instrumentation-google-genai",
        ("opentelemetry.instrumentation.google_genai", "opentelemetry.util.genai"),
        providers=_GOOGLE,
        zeros_left_out=frozenset({CACHE_READ, REASONING}),
        scenario="google-genai",
    ),
    Instrumentation(
        "otel-genai",
        "google-adk's own telemetry (Gemini)",
        ("gcp.vertex.agent",),
        providers=_GOOGLE,
        # It passes on the usage as the Gemini API sends it, which leaves cache reads and thoughts of 0
        # out (tests/instrumented/test_adk.py).
        zeros_left_out=frozenset({CACHE_READ, REASONING}),
        recording="google-adk",
    ),
    Instrumentation(
        "otel-genai",
        "opentelemetry-instrumentation-openai-v2 (Chat Completions)",
        ("opentelemetry.instrumentation.openai_v2", "opentelemetry.util.genai"),
        providers=_OPENAI,
        # Its Chat Completions path drops prompt_tokens_details and completion_tokens_details; streamed,
        # the finish reason is only on the output messages.
        dropped=frozenset({CACHE_READ, CACHE_WRITE, REASONING}),
        finish_reasons=ON_MESSAGES,
        scenario="openai-v2-stream",
    ),
    Instrumentation(
        "otel-genai",
        "opentelemetry-instrumentation-openai (OpenLLMetry)",
        ("opentelemetry.instrumentation.openai",),
        dropped=frozenset({CACHE_WRITE}),  # prompt_tokens_details.cache_write_tokens is not passed on
        scenario="openllmetry-openai",
    ),
    Instrumentation(
        "openllmetry",
        "opentelemetry-instrumentation-anthropic (OpenLLMetry)",
        ("opentelemetry.instrumentation.anthropic",),
        before=(0, 33, 4),
        input_excludes_cache=True,
    ),
    Instrumentation(
        "openllmetry",
        "opentelemetry-instrumentation-anthropic (OpenLLMetry)",
        ("opentelemetry.instrumentation.anthropic",),
        # Streamed, it adds message_start's output count (1: the API's placeholder) to message_delta's
        # final, cumulative one. Seen in 0.62.4, the version tested; a later release is read as sent until
        # it is tested. Only a call marked streamed can be corrected: messages.stream() sets no mark.
        before=(0, 62, 5),
        streamed_output_extra=1,  # tests/instrumented/test_openllmetry_streaming.py
    ),
    Instrumentation(
        "pydantic-ai",
        "pydantic-ai (Agent.instrument_all())",
        ("pydantic-ai", "pydantic_ai"),
        zeros_left_out=frozenset({CACHE_READ, CACHE_WRITE}),
        scenario="pydantic-ai-delegation",
    ),
)


@lru_cache(maxsize=1024)  # a few scopes and providers, asked for every call (twice)
def instrumentations(scope_name: str, scope_version: str, provider: str) -> tuple[Instrumentation, ...]:
    """The rows that hold for a span of this scope, version and provider (OTel provider name)."""
    return tuple(row for row in INSTRUMENTATIONS if row.holds_for(scope_name, scope_version, provider))


# Finish reasons in the OTel vocabulary (the output message's ``finish_reason`` enum); a word not listed
# is kept as the provider sent it.
_FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",  # Anthropic, Bedrock
    "stop_sequence": "stop",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",  # OpenAI
    "function_call": "tool_call",
    "tool_use": "tool_call",  # Anthropic, Bedrock
    "length": "length",
    "max_tokens": "length",  # Anthropic, Gemini (MAX_TOKENS), Bedrock
    "max_output_tokens": "length",  # OpenAI Responses' incomplete reason
    "model_context_window_exceeded": "length",
    "content_filter": "content_filter",
    "content_filtered": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",  # Gemini
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "guardrail_intervened": "content_filter",
    "error": "error",
    "malformed_function_call": "error",
}


def finish_reason(word: str) -> str:
    """A finish reason in the OTel vocabulary (``tool_use`` -> ``tool_call``, ``end_turn`` -> ``stop``)."""
    return _FINISH_REASONS.get(word.strip().lower(), word.strip())
