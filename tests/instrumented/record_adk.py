"""Record a google-adk agent's own telemetry against the local fake Gemini API (issue 33).

google-adk pins ``opentelemetry-sdk<=1.44`` and the project pins 1.45.1, so this runs in a venv of its own,
from the repository root (tests/instrumented/README.md):

    python -m venv V && V/bin/pip install google-adk==2.13.0 opentelemetry-exporter-otlp-proto-common==1.44.0
    GOOGLE_API_KEY=fake-gemini-key V/bin/python tests/instrumented/record_adk.py

It writes tests/data/recordings/google-adk.json: the OTLP/JSON request of the spans ADK made, what the
fake answered (``description``). One agent with one tool, two user messages in one session: the first
asks for the weather (a function call, then the answer), the second is answered at once. The fake, as
the Gemini API does, leaves out cache and thoughts figures of 0.
"""

import asyncio
import importlib.metadata
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from google.protobuf.json_format import MessageToDict  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from tests.instrumented.fake_providers import FakeProvider, gemini_reply, gemini_usage  # noqa: E402

MODEL = "gemini-2.5-flash"
OUT = ROOT / "tests" / "data" / "recordings" / "google-adk.json"
# (user message, prompt, cached, candidates, function call or None, text)
SCRIPT = [
    ("Weather in Paris?", 1210, 0, 12, ("get_weather", {"city": "Paris"}), None),
    ("Weather in Paris?", 1262, 1024, 18, None, "18C and light rain in Paris."),
    ("And should I take an umbrella?", 1301, 1024, 9, None, "Yes, take an umbrella."),
]


def main() -> None:
    from google.adk.agents import Agent
    from google.adk.models.google_llm import Gemini
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "18C, light rain"

    with FakeProvider() as fake:
        for number, (_message, prompt, cached, candidates, call, text) in enumerate(SCRIPT, start=1):
            usage = gemini_usage(prompt, candidates, cached_tokens=cached)
            calls = [("", *call)] if call else None
            fake.enqueue(
                gemini_reply(id=f"adk-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls)
            )
        model = Gemini(model=MODEL, base_url=fake.url)
        agent = Agent(
            name="weather_agent",
            model=model,
            instruction="You answer weather questions.",
            tools=[get_weather],
        )
        runner = InMemoryRunner(agent=agent, app_name="weather")

        async def conversation() -> list[str]:
            session = await runner.session_service.create_session(app_name="weather", user_id="u1")
            answers = []
            for message in ("Weather in Paris?", "And should I take an umbrella?"):
                content = types.Content(role="user", parts=[types.Part.from_text(text=message)])
                async for event in runner.run_async(user_id="u1", session_id=session.id, new_message=content):
                    if event.is_final_response() and event.content and event.content.parts:
                        answers.append(event.content.parts[0].text)
            return answers

        answers = asyncio.run(conversation())
        problems = list(fake.errors) + ([f"{fake.pending} replies not asked for"] if fake.pending else [])
        requests = len(fake.requests)
    provider.force_flush()
    spans = exporter.get_finished_spans()
    document = {
        "scenario": "google-adk",
        "note": "Recorded by tests/instrumented/record_adk.py: real google-adk, the fake Gemini API.",
        "description": {
            "versions": {name: importlib.metadata.version(name) for name in ("google-adk", "google-genai")},
            "answers": answers,
            "problems": problems,
            "requests": requests,
            "calls": [
                {"usage": gemini_usage(prompt, candidates, cached_tokens=cached)}
                for _, prompt, cached, candidates, _, _ in SCRIPT
            ],
        },
        "traces": MessageToDict(encode_spans(spans)),
        "logs": None,
    }
    OUT.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(
        f"{len(spans)} spans, {requests} requests, answers {answers}, problems: {problems}; written to {OUT}"
    )


if __name__ == "__main__":
    main()
