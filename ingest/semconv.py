"""Attribute keys that every family shares (ctxview's own, run keys, model, provider, tool executions).

A family's own keys (content, usage figures, span kinds) live in its module, ``ingest/families/``.
Where several keys carry the same value, tuples list them in order of preference. Sources and the
version each key arrived in: ../shared/docs/conventions.md.
"""

# --- ctxview's own convention --------------------------------------------------------------------
CTXVIEW_RUN_ID = "ctxview.run.id"
CTXVIEW_TURN = "ctxview.turn"
CTXVIEW_MANIFEST = "ctxview.manifest"

# --- What kind of span is this -------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"

# --- Run keys, in order of preference ------------------------------------------------------------
CONVERSATION_ID = "gen_ai.conversation.id"
SESSION_ID = "session.id"
TRACELOOP_SESSION_ID = "traceloop.association.properties.session_id"
LANGFUSE_SESSION_ID = "langfuse.session.id"
RUN_KEYS = (CTXVIEW_RUN_ID, CONVERSATION_ID, SESSION_ID, TRACELOOP_SESSION_ID, LANGFUSE_SESSION_ID)

# --- Model and provider --------------------------------------------------------------------------
REQUEST_MODEL = ("gen_ai.request.model", "llm.request.model_name", "llm.model_name")
RESPONSE_MODEL = ("gen_ai.response.model", "llm.response.model_name", "llm.model_name")
PROVIDER = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
RESPONSE_ID = ("gen_ai.response.id", "llm.response.id")
FINISH_REASONS = (
    "gen_ai.response.finish_reasons",
    "llm.finish_reason",
    "gen_ai.response.finish_reason",
    "anthropic.message.stop_reason",  # the anthropic SDK's own tracing (its words: end_turn, tool_use)
)
AGENT_NAME = ("gen_ai.agent.name", "agent.name", "agent_name")
AGENT_ID = ("gen_ai.agent.id",)
# OpenInference's agent graph: an agent's node, and the node it was entered from (a handoff's source).
GRAPH_NODE_ID = "graph.node.id"
GRAPH_NODE_PARENT_ID = "graph.node.parent_id"
SERVICE_NAME = "service.name"
# Sentry's conventions (getsentry/sentry-conventions #315): the model's context limit for this call.
CONTEXT_WINDOW_SIZE = "gen_ai.context.window_size"

# Anthropic's cache diagnosis (``diagnostics.cache_miss_reason`` of a response: its ``type`` and
# ``cache_missed_input_tokens``), flattened under this prefix by the ctxview SDK and by ingest (from
# OpenInference's metadata); kept with the usage figures, where the cache analysis reads it.
ANTHROPIC_CACHE_MISS = "anthropic.diagnostics.cache_miss_reason"
# OpenAI's cache diagnosis (``prompt_cache_diagnostics`` of a Responses object, GPT-5.6 and later), read
# from the response that OpenInference keeps in ``output.value``: its miss ``reason`` (or, for no
# comparison, its ``type``) and its ``cache_missed_tokens``, under the names the Anthropic one has.
OPENAI_CACHE_MISS = "openai.prompt_cache_diagnostics.cache_miss_reason"
# The anthropic SDK's own tracing puts the cache TTL split under anthropic.usage.
USAGE_PREFIXES = (
    "gen_ai.usage.",
    "llm.token_count.",
    "llm.usage.",
    "anthropic.usage.",
    "anthropic.diagnostics.",
    "openai.prompt_cache_diagnostics.",  # as the ctxview proxy flattens OpenAI's diagnosis
)

EVENT_NAME_ATTRIBUTE = "event.name"
# The time an event happened, as an ISO 8601 string (Codex CLI, Gemini CLI, Claude Code): read when the
# record has neither a time nor an observed time.
EVENT_TIMESTAMP = "event.timestamp"

# --- Tool executions -----------------------------------------------------------------------------
TOOL_NAME = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
TOOL_CALL_ID = ("gen_ai.tool.call.id", "tool.id", "tool_call_id")
TOOL_CALL_ARGUMENTS = (
    "gen_ai.tool.call.arguments",
    "tool.parameters",
    "input.value",
    "traceloop.entity.input",
)
TOOL_CALL_RESULT = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")

# Content stored elsewhere and referenced instead of sent (opentelemetry-util-genai's upload completion
# hook writes these; the names are not in the conventions yet): where the content is, never the content.
CONTENT_REFS = (
    "gen_ai.system_instructions_ref",
    "gen_ai.tool.definitions_ref",
    "gen_ai.input.messages_ref",
    "gen_ai.output.messages_ref",
)

# Whether the call was streamed (OpenLLMetry's flag, in its GenAI and its legacy spelling).
IS_STREAMING = ("gen_ai.is_streaming", "llm.is_streaming")
