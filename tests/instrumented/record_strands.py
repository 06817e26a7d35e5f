"""Record a strands-agents swarm's own telemetry against the local fake OpenAI API (issue 33).

strands-agents' OpenAI provider (the ``openai`` extra) pins ``openai<3`` (the Anthropic one
``anthropic<1``) and the project pins openai 3, so this runs in a venv of its own, from the repository root
(tests/instrumented/README.md):

    python -m venv V && V/bin/pip install 'strands-agents[openai]==1.62.0' opentelemetry-sdk==1.45.1 \\
        opentelemetry-exporter-otlp-proto-common==1.45.1
    OPENAI_API_KEY=sk-fake V/bin/python tests/instrumented/record_strands.py

It writes tests/data/recordings/strands-swarm.json: the OTLP/JSON request of the spans strands made, what
the fake answered and what each request offered (``description``). A swarm of two agents, one user
message: the researcher calls a tool, hands off to the writer (``handoff_to_agent``, the swarm's own
tool), then answers once more (strands goes on to the next model request after the handoff's tool
result); the writer answers. Every request is streamed (strands' OpenAI provider always streams, with
``include_usage``).
"""

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

from tests.instrumented.fake_providers import FakeProvider, openai_reply, openai_usage  # noqa: E402

MODEL = "gpt-4.1"
OUT = ROOT / "tests" / "data" / "recordings" / "strands-swarm.json"
# Short instructions keep the recording small (strands repeats them in events on several spans); the
# scripted figures stand for a real agent's longer prompt.
RESEARCHER = "You find the weather, then hand the facts to the writer."
WRITER = "You write one short line of travel advice from the facts you were handed."
HANDOFF = {"agent_name": "writer", "message": "Write advice: 18C, light rain in Paris."}
# (agent, prompt, cached, completion, tool call or None, text): each answer as the fake gives it. The
# researcher's requests each read the one before from the cache; the writer's first request shares no
# prefix with them (other instructions, other tools).
SCRIPT = [
    ("researcher", 1460, 0, 20, ("call_1", "get_weather", {"city": "Paris"}), None),
    ("researcher", 1500, 1408, 30, ("call_2", "handoff_to_agent", HANDOFF), None),
    ("researcher", 1560, 1408, 8, None, "Handed to the writer."),
    ("writer", 1450, 0, 12, None, "Pack an umbrella: 18C and rain."),
]


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # strands traces through the global tracer provider

    from strands import Agent, tool
    from strands.models.openai import OpenAIModel
    from strands.multiagent import Swarm

    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "18C, light rain"

    with FakeProvider() as fake:
        for number, (_agent, prompt, cached, completion, call, text) in enumerate(SCRIPT, start=1):
            usage = openai_usage(prompt, completion, cached_tokens=cached)
            calls = [call] if call else None
            fake.enqueue(
                openai_reply(
                    id=f"chatcmpl-st-{number}", model=MODEL, usage=usage, text=text, tool_calls=calls
                )
            )
        client_args = {"api_key": "sk-fake", "base_url": fake.openai_base_url, "max_retries": 0}
        model = OpenAIModel(client_args=client_args, model_id=MODEL)
        researcher = Agent(
            name="researcher",
            system_prompt=RESEARCHER,
            model=model,
            tools=[get_weather],
            callback_handler=None,
        )
        writer = Agent(name="writer", system_prompt=WRITER, model=model, callback_handler=None)
        result = Swarm([researcher, writer], entry_point=researcher)("Weather advice for Paris?")
        requests = [request.body for request in fake.requests]
        problems = list(fake.errors) + ([f"{fake.pending} replies not asked for"] if fake.pending else [])
    spans = exporter.get_finished_spans()
    document = {
        "scenario": "strands-swarm",
        "note": "Recorded by tests/instrumented/record_strands.py: real strands-agents, the fake OpenAI API.",
        "description": {
            "versions": {
                name: importlib.metadata.version(name)
                for name in ("strands-agents", "openai", "opentelemetry-sdk")
            },
            "status": str(result.status),
            "node_history": [node.node_id for node in result.node_history],
            "problems": problems,
            "requests": len(requests),
            "calls": [
                {
                    "agent": agent,
                    "usage": openai_usage(prompt, completion, cached_tokens=cached),
                    "tools_offered": [tool["function"]["name"] for tool in request.get("tools", [])],
                    "tool_call": call[1] if call else None,
                    "streamed": bool(request.get("stream")),
                    "system": request["messages"][0]["content"][:40],
                }
                for (agent, prompt, cached, completion, call, _), request in zip(
                    SCRIPT, requests, strict=False
                )
            ],
        },
        "traces": MessageToDict(encode_spans(spans)),
        "logs": None,
    }
    OUT.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(spans)} spans, {len(requests)} requests, {result.status}; problems: {problems}; wrote {OUT}")


if __name__ == "__main__":
    main()
