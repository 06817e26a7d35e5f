"""What a telemetry family is: everything ctxview knows about one source of GenAI telemetry. No Django.

A family says how it marks a model call, a tool execution or an agent invocation; where its content is
(messages, system instructions, tool definitions) and how to read it; which attributes carry content;
which keys hold its usage figures and what they include. What each instrumentation of a family
leaves out, per provider, is the table in ``ingest.families.providers``. The registry
(``ingest.families``) lists the families in order of preference.
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ingest.families.messages import Event
from ingest.span_rows import SpanRow, span_row

MODEL_CALL = "model_call"
TOOL = "tool"
AGENT = "agent"
# What ``Family.continues`` calls a Responses API previous_response_id (the other: "conversation").
PREVIOUS_RESPONSE = "previous response"

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


def synthetic_id(size: int, *parts: str) -> str:
    """A stable hex id (``size`` characters) for a call that no span names: the same parts, the same id."""
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:size]


def session_row(
    trace_id: str, span_id: str, name: str, start_ns: int, end_ns: int, attributes: dict
) -> SpanRow:
    """The span row of a call assembled from a session's records (no parent, no events)."""
    return span_row(
        trace_id=trace_id, span_id=span_id, name=name, start_ns=start_ns, end_ns=end_ns, attributes=attributes
    )


@dataclass(frozen=True)
class SessionCall:
    """One model request, assembled from a CLI session's stored spans and log records."""

    row: SpanRow  # (as ``otlp.spans`` yields) for ``normalise.call_record``; its ids are stable
    resource: dict
    turn_key: str  # the CLI's own turn (prompt, turn id, trace): a new value starts a new turn
    reported: dict  # figures as the CLI reported them (its cost included), kept beside ours


@dataclass(frozen=True)
class Sessions:
    """How a coding CLI's calls are assembled: from a whole session's rows, whatever arrived first.

    A call may be born from a log record alone (Claude Code's default, Codex) or from a span, and
    completed by the other when it arrives; assembling from every stored row of the session makes the
    result independent of arrival order."""

    log_key: str  # the attribute that names the session on log records
    span_key: str  # ... and on spans
    log_events: frozenset[str]  # the ``event.name`` values read
    span_names: frozenset[str]
    assemble: Callable[[list[dict], list[dict]], list[SessionCall]]  # (spans, logs) -> calls, in order
    call_names: frozenset[str]  # the names its calls get (the run's calls it owns)
    no_content_note: str = ""  # what to turn on to see the window
    # Log events too big to read whole for every batch -> the attributes read of those that came long
    # before the batch (their calls are not made again; the assembly needs only these attributes).
    heavy_log_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The log event that carries the user's prompt, and its attribute: the run's title where the calls
    # carry no messages (ingest.titles). ``prompt_withheld``: what the CLI sends instead of a prompt it
    # was told not to log.
    prompt_event: str = ""
    prompt_key: str = "prompt"
    prompt_withheld: frozenset[str] = frozenset()


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
    # attributes -> what the request continues where the provider keeps the earlier turns (the Responses
    # API's previous_response_id or conversation): ("previous response" | "conversation", its id).
    continues: Callable[[dict], tuple[str, str] | None] | None = None
    # attributes -> the response's id where no shared key (``semconv.RESPONSE_ID``) carries it: a request
    # that continues this response finds its call by it.
    response_id: Callable[[dict], str | None] | None = None
    # A coding CLI: calls assembled per session from its spans and log records (``ingest.sessions``).
    sessions: Sessions | None = None
    # An agent span's attributes -> the names of the sub-agents it declares: its model is offered each
    # as a tool (``ingest.agents``).
    sub_agents: Callable[[dict], tuple[str, ...]] | None = None
    # An agent span's attributes -> (the step, the graph it is a step of: "" for the top graph) when the span
    # is one step of a graph run rather than an agent of its own (LangGraph's node runs): its calls may be
    # its graph's agent's (``ingest.agents``).
    graph_step: Callable[[dict], tuple[str, str] | None] | None = None
    # A tool execution's (span name, attributes) -> the tool it ran, where no shared key names it.
    tool_name: Callable[[str, dict], str] | None = None
    # A tool execution's attributes -> what this family's span adds to it (an MCP span: its method, session
    # and server), by attribute name; shown with the execution the span is part of.
    tool_details: Callable[[dict], dict] | None = None
    # (span name, attributes) -> whether this family assembles that span itself (no call of its own).
    claims_span: Callable[[str, dict], bool] = _never
    # Attributes of its log records that carry content: emptied for hash-only projects.
    log_content_keys: tuple[str, ...] = ()
