"""What a telemetry family is: everything ctxview knows about one source of GenAI telemetry. No Django.

A family says how it marks a model call, a tool execution or an agent invocation; where its content is
(messages, system instructions, tool definitions) and how to read it; which attributes carry content;
which keys hold its usage figures and what they include. What each instrumentation of a family
leaves out, per provider, is the table in ``ingest.families.providers``. The registry
(``ingest.families``) lists the families in order of preference.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ingest.families.messages import Event

MODEL_CALL = "model_call"
TOOL = "tool"
AGENT = "agent"

# What a reader returns: the content (None: this family's keys are not there) and the attribute keys it
# was read from (a key ending in "." is a prefix of flattened keys).
Read = tuple[list[dict] | None, list[str]]
MessagesReader = Callable[[dict, dict, list[Event]], Read]  # (attributes, content attributes, events)
# (attributes, content attributes) -> the finish reasons as the family sent them, beyond the span's
# finish-reason attribute (in its output messages, its response object), or None when it has none.
FinishReasonsReader = Callable[[dict, dict], tuple[str, ...] | None]


def version_tuple(text: str) -> tuple[int, ...]:
    """ "0.1.13" -> (0, 1, 13): an instrumentation's scope version, to compare with a known fix."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _no_kind(name: str, attributes: dict) -> str | None:
    return None


def _never(*args: str) -> bool:
    return False


@dataclass(frozen=True)
class UsageKeys:
    """The attributes a family reports usage figures in, each in order of preference."""

    input: tuple[str, ...] = ()
    output: tuple[str, ...] = ()
    cache_read: tuple[str, ...] = ()
    cache_write: tuple[str, ...] = ()
    reasoning: tuple[str, ...] = ()


@dataclass(frozen=True)
class Family:
    name: str
    # model_call, tool, agent, or None when the span is not this family's to interpret.
    kind_of: Callable[[str, dict], str | None] = _no_kind
    input_messages: MessagesReader | None = None
    output_messages: MessagesReader | None = None
    system: Callable[[dict, dict], Read] | None = None  # (attributes, content attributes)
    tools: Callable[[dict, dict], Read] | None = None  # (attributes, content attributes)
    # Attributes that carry content: moved out of a stored span once they are items.
    content_keys: tuple[str, ...] = ()
    content_prefixes: tuple[str, ...] = ()
    # Attributes and events that carry content too: emptied for hash-only projects.
    other_content_keys: tuple[str, ...] = ()
    other_content_prefixes: tuple[str, ...] = ()
    content_events: frozenset[str] = frozenset()
    # Of those events, the ones sent as log records (joined to their span whenever they arrive).
    content_log_events: frozenset[str] = frozenset()
    usage: UsageKeys = field(default_factory=UsageKeys)
    # Instrumentation rules (by scope, provider, version) are rows of ``providers.INSTRUMENTATIONS``;
    # these two hooks are for a family whose every span follows the rule, whatever its scope.
    # (scope name, scope version) -> whether its input figure leaves cached tokens out (conventions §6).
    input_excludes_cache: Callable[[str, str], bool] = _never
    # scope name -> whether it leaves zero figures out (an absent cache figure beside an input is 0).
    omits_zero_figures: Callable[[str], bool] = _never
    # attributes -> candidate values of usage figures found elsewhere (a raw provider usage object), by
    # figure name, each in order of preference; read only where no usage key has the figure.
    usage_fallback: Callable[[dict], dict[str, tuple]] | None = None
    # Where the family puts finish reasons when the span's finish-reason attribute has none.
    finish_reasons: FinishReasonsReader | None = None
    # attributes -> usage details found elsewhere (a provider's cache diagnosis in a metadata JSON), by
    # the attribute name ctxview keeps them under; added to the call's reported usage.
    usage_details: Callable[[dict], dict[str, str | int]] | None = None
    # attributes -> what the provider or the framework did to this call's context before the model saw
    # it (Anthropic's context editing, a compaction): each {"type": ..., "<cleared_…>": count}.
    context_edits: Callable[[dict], list[dict]] | None = None
