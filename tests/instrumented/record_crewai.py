"""Record a CrewAI crew through OpenInference against the local fake OpenAI API (issue 33).

CrewAI pins ``openai<3`` and the project pins openai 3, so this runs in a venv of its own, from the
repository root (tests/instrumented/README.md):

    python -m venv V && V/bin/pip install crewai==1.15.30 openinference-instrumentation-crewai==1.1.2 \\
        opentelemetry-sdk==1.45.1
    CREWAI_DISABLE_TELEMETRY=true OTEL_SDK_DISABLED=false V/bin/python tests/instrumented/record_crewai.py

It writes tests/data/recordings/openinference-crewai.json: the OTLP/JSON request of the spans, what the fake
answered and what each request offered (``description``). Two agents, one task each, in sequence: the
researcher calls a tool, then answers; the writer answers from it.
"""

import importlib.metadata
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage  # noqa: E402

MODEL = "gpt-4.1"
OUT = ROOT / "tests" / "data" / "recordings" / "openinference-crewai.json"
# (agent, prompt, cached, tool call or None, text): each answer as the fake gives it.
SCRIPT = [
    ("Weather researcher", 820, 0, ("call_weather", "get_weather", {"city": "Paris"}), None),
    (
        "Weather researcher",
        900,
        768,
        None,
        "Thought: I know the weather.\nFinal Answer: 18C, light rain in Paris.",
    ),
    (
        "Travel writer",
        640,
        0,
        None,
        "Thought: I can write it.\nFinal Answer: Pack an umbrella: 18C and rain.",
    ),
]


def main() -> None:
    from crewai import LLM, Agent, Crew, Task
    from crewai.tools import tool
    from openinference.instrumentation.crewai import CrewAIInstrumentor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The event listener (the instrumentation's way that makes a span per LLM call).
    CrewAIInstrumentor().instrument(tracer_provider=provider, use_event_listener=True)

    @tool("get_weather")
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "18C, light rain"

    with FakeProvider() as fake:
        for number, (_agent, prompt, cached, call, text) in enumerate(SCRIPT, start=1):
            usage = openai_usage(prompt, 24, cached_tokens=cached)
            calls = [call] if call else None
            fake.enqueue(
                openai_reply(
                    id=f"chatcmpl-crew-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls
                )
            )
        llm = LLM(model=f"openai/{MODEL}", base_url=fake.openai_base_url, api_key="sk-fake-test")
        researcher = Agent(
            role="Weather researcher", goal="Find the weather", backstory="You check forecasts.",
            tools=[get_weather], llm=llm, allow_delegation=False, verbose=False,
        )  # fmt: skip
        writer = Agent(
            role="Travel writer", goal="Write travel advice", backstory="You write short tips.",
            llm=llm, allow_delegation=False, verbose=False,
        )  # fmt: skip
        research = Task(description="The weather in Paris?", expected_output="The weather", agent=researcher)
        advice = Task(description="One line of advice for Paris.", expected_output="A line", agent=writer)
        result = Crew(agents=[researcher, writer], tasks=[research, advice], verbose=False).kickoff()
        requests = [request.body for request in fake.requests]
        problems = list(fake.errors) + ([f"{fake.pending} replies not asked for"] if fake.pending else [])
    spans = exporter.get_finished_spans()
    document = {
        "scenario": "openinference-crewai",
        "note": "Recorded by tests/instrumented/record_crewai.py: real CrewAI, the fake OpenAI API.",
        "description": {
            "versions": {
                name: importlib.metadata.version(name)
                for name in ("crewai", "openinference-instrumentation-crewai", "openai", "opentelemetry-sdk")
            },
            "result": str(result),
            "problems": problems,
            "calls": [
                {
                    "agent": agent,
                    "usage": openai_usage(prompt, 24, cached_tokens=cached),
                    "tools_offered": [tool["function"]["name"] for tool in request.get("tools", [])],
                }
                for (agent, prompt, cached, _, _), request in zip(SCRIPT, requests, strict=False)
            ],
            "requests": len(requests),
        },
        "traces": MessageToDict(encode_spans(spans)),
        "logs": None,
    }
    OUT.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(spans)} spans, {len(requests)} requests, problems: {problems}; written to {OUT}")


if __name__ == "__main__":
    main()
