"""OTLP/protobuf payloads for the benchmarks, built without Django (any OTLP server can take them).

- ``build_batches``: the load, ExportTraceServiceRequests of BATCH_SIZE ~4 KB chat spans, one agent
  conversation (run) per SPANS_PER_TRACE spans.
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
