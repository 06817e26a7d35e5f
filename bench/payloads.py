"""OTLP/protobuf payloads for the benchmarks, built without Django (any OTLP server can take them).

- ``build_batches``: the load, ExportTraceServiceRequests of BATCH_SIZE ~4 KB chat spans, one agent
  conversation (run) per SPANS_PER_TRACE spans.
- ``build_conversations``: the load as agents export it (issue 19): each conversation spread over several
  traces, an agent span per trace with its chat spans under it, OpenInference and GenAI attributes;
  ``fresh=True``: every call's messages new text (issue 37).
- ``build_run``: one long run whose every call resends its history (optionally a sliding window of it),
  one request per call, as an agent exporting each call as it ends.
"""

import hashlib
import json
import os
import random
import struct
import time

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

BATCH_SIZE = 512
SPANS_PER_TRACE = 50
MODELS = [("openai", "gpt-4o"), ("anthropic", "claude-sonnet-4-5"), ("gcp.gemini", "gemini-2.5-pro")]


def make_vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    # Random pseudo-words: text that gzip shrinks about as much as real prose, not 100x.
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [26 - i for i in range(26)]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(size)]


def text(rng: random.Random, vocabulary: list[str], chars: int) -> str:
    return " ".join(rng.choices(vocabulary, k=max(1, chars // 6)))


def attribute(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def span_counts(total_spans: int) -> list[int]:
    """Spans in each batch of ``build_batches(total_spans)``."""
    return [min(BATCH_SIZE, total_spans - start) for start in range(0, total_spans, BATCH_SIZE)]


def build_batches(total_spans: int, seed: int = 1) -> list[bytes]:
    """Serialized ExportTraceServiceRequests of BATCH_SIZE chat spans, SPANS_PER_TRACE per trace."""
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    run = os.urandom(8)  # a fresh id prefix per run: re-runs against one server never collide
    now = time.time_ns()
    batches, request, system_prompt, provider, model = [], None, "", "", ""
    for index in range(total_spans):
        trace, position = divmod(index, SPANS_PER_TRACE)  # a trace is one conversation (run)
        if index % BATCH_SIZE == 0:
            request = ExportTraceServiceRequest()
            resource_spans = request.resource_spans.add()
            resource_spans.resource.attributes.extend(
                [attribute("service.name", "bench-agent"), attribute("telemetry.sdk.language", "python")]
            )
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name, scope_spans.scope.version = "bench.genai", "1.0"
            batches.append(request)
        if position == 0 or index % BATCH_SIZE == 0:
            # One conversation per trace: same system prompt and model for all its spans.
            trace_rng = random.Random(f"{seed}-{trace}")
            system_prompt = text(trace_rng, vocabulary, 500)
            provider, model = trace_rng.choice(MODELS)
        messages = [
            {"role": "system", "parts": [{"type": "text", "content": system_prompt}]},
            {"role": "user", "parts": [{"type": "text", "content": text(rng, vocabulary, 1000)}]},
            {"role": "assistant", "parts": [{"type": "text", "content": text(rng, vocabulary, 700)}]},
            {"role": "user", "parts": [{"type": "text", "content": text(rng, vocabulary, 700)}]},
        ]
        span: Span = scope_spans.spans.add()
        span.trace_id = run + struct.pack(">Q", trace + 1)
        # No parent: ctxview takes a chat span nested in another chat span for the same request traced
        # twice (an SDK tracing itself under an instrumentation), so 50 nested spans would be one call.
        span.span_id = struct.pack(">Q", index + 1)
        span.name, span.kind = f"chat {model}", Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano = now + index * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + rng.randint(200, 9000) * 1_000_000
        span.attributes.extend(
            [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.provider.name", provider),
                attribute("gen_ai.request.model", model),
                attribute("gen_ai.response.model", model),
                attribute("gen_ai.conversation.id", f"conv-{run.hex()}-{trace}"),
                attribute("gen_ai.usage.input_tokens", rng.randint(500, 20000)),
                attribute("gen_ai.usage.output_tokens", rng.randint(20, 2000)),
                attribute("gen_ai.usage.cache_read.input_tokens", rng.randint(0, 15000)),
                attribute("gen_ai.input.messages", json.dumps(messages)),
            ]
        )
    return [request.SerializeToString() for request in batches]


# The conversations load: ~300 model calls per conversation over 5 traces, an AGENT root span per trace
# with 60 chat children; each call sends 6 messages (the system prompt, the last two exchanges resent,
# and a new user message). Spans are exported as they end: a trace's chats, then its agent span.
TRACES_PER_CONVERSATION = 5
CHATS_PER_TRACE = 60
SPANS_PER_CONVERSATION = TRACES_PER_CONVERSATION * (CHATS_PER_TRACE + 1)


def conversation_spans(total_spans: int) -> tuple[int, int]:
    """(spans, model calls) of ``build_conversations(total_spans)``: whole traces only."""
    traces = max(1, total_spans // (CHATS_PER_TRACE + 1))
    return traces * (CHATS_PER_TRACE + 1), traces * CHATS_PER_TRACE


def build_conversations(total_spans: int, seed: int = 3, fresh: bool = False) -> list[bytes]:
    """Serialized ExportTraceServiceRequests of BATCH_SIZE spans (the last one shorter) of conversations
    spread over TRACES_PER_CONVERSATION traces; ``conversation_spans`` says how many spans and calls.

    ``fresh`` (issue 37): every call's 6 input messages (~2 KB in all) are new text never sent before, as
    when an agent reads new files or tool output at every step, and each call reports a random cache read.
    """
    rng = random.Random(seed)
    vocabulary = make_vocabulary(rng)
    run = os.urandom(8)
    now = time.time_ns()
    spans, _ = conversation_spans(total_spans)
    ordered: list[Span] = []
    conversation = -1
    for trace in range(spans // (CHATS_PER_TRACE + 1)):
        if trace % TRACES_PER_CONVERSATION == 0:
            conversation += 1
            conversation_id = f"conv-{run.hex()}-{conversation}"
            system_prompt = text(rng, vocabulary, 500)
            provider, model = rng.choice(MODELS)
            users = [text(rng, vocabulary, 600) for _ in range(2)]
            replies = [text(rng, vocabulary, 400) for _ in range(2)]
        trace_id = run + struct.pack(">II", conversation, trace)
        root_id = struct.pack(">Q", (trace + 1) << 32)
        first_ns = now + trace * (CHATS_PER_TRACE + 2) * 1_000_000_000
        for position in range(CHATS_PER_TRACE):
            users.append(text(rng, vocabulary, 600))
            messages = [
                ("system", system_prompt),
                ("user", users[-3]),
                ("assistant", replies[-2]),
                ("user", users[-2]),
                ("assistant", replies[-1]),
                ("user", users[-1]),
            ]
            if fresh:  # ~340 characters each: ~2 KB of text no earlier call had
                messages = [(role, text(rng, vocabulary, 340)) for role, _ in messages]
            span = Span(trace_id=trace_id, parent_span_id=root_id, kind=Span.SPAN_KIND_CLIENT)
            span.span_id = struct.pack(">Q", ((trace + 1) << 32) + position + 1)
            span.name = f"chat {model}"
            span.start_time_unix_nano = first_ns + position * 1_000_000_000
            span.end_time_unix_nano = span.start_time_unix_nano + 800_000_000
            prompt, output = rng.randint(1500, 20000), rng.randint(20, 2000)
            span.attributes.extend(
                [
                    attribute("openinference.span.kind", "LLM"),
                    attribute("llm.model_name", model),
                    attribute("llm.provider", provider.split(".")[0]),
                    attribute("llm.token_count.prompt", prompt),
                    attribute("llm.token_count.completion", output),
                    attribute("gen_ai.operation.name", "chat"),
                    attribute("gen_ai.provider.name", provider),
                    attribute("gen_ai.request.model", model),
                    attribute("gen_ai.response.model", model),
                    attribute("gen_ai.response.id", f"resp-{span.span_id.hex()}"),
                    attribute("gen_ai.conversation.id", conversation_id),
                    attribute("gen_ai.usage.input_tokens", prompt),
                    attribute("gen_ai.usage.output_tokens", output),
                ]
            )
            if fresh:
                read = rng.randint(0, prompt)
                span.attributes.extend(
                    [
                        attribute("llm.token_count.prompt_details.cache_read", read),
                        attribute("gen_ai.usage.cache_read.input_tokens", read),
                    ]
                )
            for index, (role, content) in enumerate(messages):
                span.attributes.extend(
                    [
                        attribute(f"llm.input_messages.{index}.message.role", role),
                        attribute(f"llm.input_messages.{index}.message.content", content),
                    ]
                )
            replies.append(text(rng, vocabulary, 400))
            ordered.append(span)
        root = Span(trace_id=trace_id, span_id=root_id, name="agent run", kind=Span.SPAN_KIND_INTERNAL)
        root.start_time_unix_nano = first_ns - 10_000_000
        root.end_time_unix_nano = first_ns + CHATS_PER_TRACE * 1_000_000_000
        root.attributes.extend(
            [
                attribute("openinference.span.kind", "AGENT"),
                attribute("gen_ai.operation.name", "invoke_agent"),
                attribute("gen_ai.agent.name", "bench-agent"),
                attribute("gen_ai.conversation.id", conversation_id),
            ]
        )
        ordered.append(root)  # it ends after its children, so it is exported after them
    bodies = []
    for start in range(0, len(ordered), BATCH_SIZE):
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.extend(
            [attribute("service.name", "bench-agent"), attribute("telemetry.sdk.language", "python")]
        )
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name, scope_spans.scope.version = "openinference.instrumentation.bench", "1.0"
        scope_spans.spans.extend(ordered[start : start + BATCH_SIZE])
        bodies.append(request.SerializeToString())
    return bodies


def build_run(
    calls: int, seed: int = 7, window: int | None = None, conversation: str = "storage-bench"
) -> list[bytes]:
    """One protobuf request per call: a system prompt, 12 tools and the history so far.

    ``window``: keep only the last so many messages (an agent trimming its context); None keeps all,
    so call n resends n user and n - 1 assistant messages.
    """
    rng = random.Random(seed)
    words = "shard latency payment retry queue worker deploy config timeout ledger invoice cache".split()
    tools = [
        {
            "type": "function",
            "name": f"tool_{n}",
            "description": " ".join(rng.choices(words, k=30)),
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
        for n in range(12)
    ]
    system = json.dumps([{"type": "text", "content": " ".join(rng.choices(words, k=400))}])
    tool_definitions = json.dumps(tools)
    trace_id = hashlib.sha256(conversation.encode()).digest()[:16]
    history: list[dict] = []
    requests = []
    for number in range(1, calls + 1):
        history.append(
            {"role": "user", "parts": [{"type": "text", "content": " ".join(rng.choices(words, k=60))}]}
        )
        if window is not None:
            history = history[-window:]
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.append(attribute("service.name", "agent"))
        span = resource_spans.scope_spans.add().spans.add()
        span.trace_id = trace_id
        span.span_id = number.to_bytes(8, "big")
        span.name, span.kind = "chat model", Span.SPAN_KIND_CLIENT
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + number * 1_000_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 1_000
        span.attributes.extend(
            [
                attribute("gen_ai.operation.name", "chat"),
                attribute("gen_ai.provider.name", "anthropic"),
                attribute("gen_ai.request.model", "m1"),
                attribute("gen_ai.input.messages", json.dumps(history)),
                attribute("gen_ai.conversation.id", conversation),
                attribute("gen_ai.system_instructions", system),
                attribute("gen_ai.tool.definitions", tool_definitions),
                attribute("gen_ai.usage.input_tokens", 3000 + 90 * number),
                attribute("gen_ai.usage.output_tokens", 80),
            ]
        )
        requests.append(request.SerializeToString())
        history.append(
            {"role": "assistant", "parts": [{"type": "text", "content": " ".join(rng.choices(words, k=40))}]}
        )
    return requests
