"""Span attribute keys the SDK writes: OTel GenAI semantic conventions (v1.40+) plus ctxview's own."""

# OTel GenAI (development stability): https://opentelemetry.io/docs/specs/semconv/gen-ai/
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
CONVERSATION_ID = "gen_ai.conversation.id"
# input_tokens includes the cached tokens (v1.40 rule); the two cache figures are subsets of it.
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
ERROR_TYPE = "error.type"
OUTPUT_MESSAGES = "gen_ai.output.messages"
# Anthropic's cache diagnosis of a response (diagnostics.cache_miss_reason), flattened: no convention
# has it yet, so it keeps the response's own path under the provider's prefix.
CACHE_MISS_REASON_TYPE = "anthropic.diagnostics.cache_miss_reason.type"
CACHE_MISSED_INPUT_TOKENS = "anthropic.diagnostics.cache_miss_reason.cache_missed_input_tokens"

# ctxview's convention (see CONVENTION.md).
RUN_ID = "ctxview.run.id"
TURN = "ctxview.turn"
MANIFEST = "ctxview.manifest"
MANIFEST_DROPPED_ITEMS = "ctxview.manifest.dropped_items"
SDK_VERSION = "ctxview.sdk.version"

OPERATION_CHAT = "chat"
