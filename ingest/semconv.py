"""Attribute keys of every instrumentation family ctxview reads. No raw "gen_ai.…" strings elsewhere.

Where several keys carry the same figure, tuples list them in order of preference. Sources and the
version each key arrived in: ../shared/docs/conventions.md.
"""

# --- ctxview's own convention --------------------------------------------------------------------
CTXVIEW_RUN_ID = "ctxview.run.id"
CTXVIEW_TURN = "ctxview.turn"
CTXVIEW_MANIFEST = "ctxview.manifest"

# --- What kind of span is this -------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
OPENINFERENCE_SPAN_KIND = "openinference.span.kind"
TRACELOOP_SPAN_KIND = "traceloop.span.kind"
LEGACY_REQUEST_TYPE = "llm.request.type"  # OpenLLMetry before gen_ai.operation.name

MODEL_CALL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion", "completion", "generate"})
LEGACY_MODEL_CALL_REQUEST_TYPES = frozenset({"chat", "completion"})
TOOL_OPERATIONS = frozenset({"execute_tool"})
AGENT_OPERATIONS = frozenset({"invoke_agent", "invoke_workflow"})
OPENINFERENCE_LLM = "LLM"
OPENINFERENCE_TOOL = "TOOL"
OPENINFERENCE_AGENT = "AGENT"
TRACELOOP_TOOL = "tool"
TRACELOOP_AGENT_KINDS = frozenset({"agent", "workflow"})
PYDANTIC_AI_LEGACY_AGENT_SPAN = "agent run"  # instrumentation format v2 named agent spans this way

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
FINISH_REASONS = ("gen_ai.response.finish_reasons", "llm.finish_reason", "gen_ai.response.finish_reason")
AGENT_NAME = ("gen_ai.agent.name", "agent.name", "agent_name")
SERVICE_NAME = "service.name"

# --- Usage ---------------------------------------------------------------------------------------
INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
CACHE_READ_TOKENS = (
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    "gen_ai.usage.input_tokens.cached",
    "gen_ai.usage.details.cache_read_tokens",  # pydantic-ai duplicates the first-class figure here
)
CACHE_WRITE_TOKENS = (
    "gen_ai.usage.cache_write.input_tokens",  # the genai conventions repository's rename
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.cache_creation_input_tokens",
    "llm.token_count.prompt_details.cache_write",
    "gen_ai.usage.input_tokens.cache_write",
    "gen_ai.usage.details.cache_write_tokens",
)
REASONING_TOKENS = (
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.usage.reasoning_tokens",
    "llm.usage.reasoning_tokens",
    "llm.token_count.completion_details.reasoning",
    "gen_ai.usage.details.reasoning_tokens",  # pydantic-ai puts OpenAI's reasoning figure only here
)
LOGFIRE_RAW_USAGE = "gen_ai.usage.raw"
USAGE_PREFIXES = ("gen_ai.usage.", "llm.token_count.", "llm.usage.")

# --- Content -------------------------------------------------------------------------------------
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
LEGACY_PROMPT = "gen_ai.prompt"  # flattened gen_ai.prompt.<i>.* in OpenLLMetry; one JSON string in v1.26
LEGACY_COMPLETION = "gen_ai.completion"
OPENINFERENCE_INPUT_MESSAGES = "llm.input_messages"
OPENINFERENCE_OUTPUT_MESSAGES = "llm.output_messages"
OPENINFERENCE_TOOLS = "llm.tools"
LEGACY_FUNCTIONS = "llm.request.functions"
PYDANTIC_AI_REQUEST_PARAMETERS = "model_request_parameters"

# Span events (v1.26–1.27) and log events (v1.28–1.36, and the current details event).
EVENT_CONTENT_PROMPT = "gen_ai.content.prompt"
EVENT_CONTENT_COMPLETION = "gen_ai.content.completion"
EVENT_OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
EVENT_MESSAGE_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
EVENT_CHOICE = "gen_ai.choice"
EVENT_NAME_ATTRIBUTE = "event.name"

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
