"""A small agent for the monitors' live test: the real OpenAI SDK, instrumented by
``opentelemetry-instrumentation-openai-v2``, against the local fake provider, exporting OTLP/HTTP to a
ctxview server. Each run is one trace (a parent span), one call per system prompt given.

    python -m tests.monitors.agent ENDPOINT KEY RUNS_JSON   # RUNS_JSON: [[system prompt, ...], ...]
"""

import json
import os
import sys

from tests.instrumented import fake_providers as fp
from tests.instrumented.run import SAFETY_ENV


def main(endpoint: str, key: str, runs: list[list[str]]) -> None:
    os.environ.update(SAFETY_ENV)
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    import openai
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "monitored-agent"}))
    exporter = OTLPSpanExporter(
        endpoint=f"{endpoint.rstrip('/')}/v1/traces", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("monitored-agent")
    with fp.FakeProvider() as fake:
        client = openai.OpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
        number = 0
        for prompts in runs:
            with tracer.start_as_current_span("agent run"):
                messages = [{"role": "user", "content": "Why is the checkout slow? " * 30}]
                for system in prompts:
                    number += 1
                    prompt = 2000 + 100 * number
                    fake.enqueue(
                        fp.openai_reply(
                            id=f"chatcmpl-{number}",
                            model="gpt-4.1-2025-04-14",
                            usage=fp.openai_usage(prompt, 20, cached_tokens=prompt - 300),
                            text=f"Step {number}: looking.",
                        )
                    )
                    client.chat.completions.create(
                        model="gpt-4.1", messages=[{"role": "system", "content": system}, *messages]
                    )
                    messages += [
                        {"role": "assistant", "content": f"Step {number}: looking."},
                        {"role": "user", "content": f"Go on ({number})."},
                    ]
        assert fake.errors == [], fake.errors
    provider.force_flush()
    provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
