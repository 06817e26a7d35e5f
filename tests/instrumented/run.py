"""Run one instrumented scenario in this process, or every scenario in subprocesses.

    python -m tests.instrumented.run SCENARIO --endpoint http://127.0.0.1:8000 --key cvk_...
    python -m tests.instrumented.run SCENARIO --capture /tmp/out.json        # export nowhere, save OTLP/JSON
    python -m tests.instrumented.run --all --capture-dir tests/data/otlp      # regenerate the fixtures
    python -m tests.instrumented.run --list

One scenario per process: instrumentors patch the SDK classes and read their environment variables
when they instrument. The scenario's environment is set here, before any instrumentation is imported.
The process starts the fake provider, sets up a TracerProvider and LoggerProvider with the real
OTLP/HTTP protobuf exporters (batch processors; force_flush and shutdown at the end), instruments,
holds the conversation, and prints one line ``CTXVIEW-SCENARIO-RESULT <json>`` (see ``describe``).
It exits 1 when something went wrong (an unexpected provider request, a reply left unused, a
missing model-call span, a failed export); the JSON line is printed all the same.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import importlib.metadata
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from tests.instrumented import fake_providers as fp
from tests.instrumented.scenarios import (
    ANTHROPIC_MODEL,
    ANTHROPIC_RESPONSE_MODEL,
    BILLING_INSTRUCTIONS,
    CUSTOMER,
    EXPERT_INSTRUCTIONS,
    GEMINI_MODEL,
    GEMINI_RESPONSE_MODEL,
    INVOICE,
    LEAD_INSTRUCTIONS,
    OPENAI_MODEL,
    OPENAI_RESPONSE_MODEL,
    ORCHESTRATOR_INSTRUCTIONS,
    PLANNER_INSTRUCTIONS,
    RESEARCHER_INSTRUCTIONS,
    RESULT_MARKER,
    SCENARIOS,
    SYSTEM_PROMPT,
    TOOL_RESULTS,
    TOOLS,
    TRIAGE_INSTRUCTIONS,
    Scenario,
    ScenarioError,
    canonical_usage,
    child_environment,
    is_model_call,
    run_scenario,
)

# Anything that tries to leave the machine goes to a closed local port instead; the fake provider,
# the ctxview server and the exporters are reached on loopback directly.
SAFETY_ENV = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost,::1",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "all_proxy": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost,::1",
    "OPENAI_API_KEY": "sk-fake-test",
    "ANTHROPIC_API_KEY": "sk-ant-fake-test",
    "GOOGLE_API_KEY": "fake-gemini-key",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
}
APP_SCOPE = "tests.instrumented.app"
DIAGNOSIS_SESSION = "anthropic-diagnostics-session"


def prepare_environment(scenario: Scenario) -> None:
    clean = child_environment()
    os.environ.clear()
    os.environ.update(clean)
    os.environ.update(SAFETY_ENV)
    os.environ.update(scenario.env)


# ---------------------------------------------------------------------------------------------
# Telemetry set-up
# ---------------------------------------------------------------------------------------------
class Telemetry:
    """Providers with the real OTLP/HTTP exporters (when an endpoint is given) and in-memory copies."""

    def __init__(self, scenario: Scenario, endpoint: str | None, key: str | None):
        from opentelemetry import _logs, trace
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import (
            BatchLogRecordProcessor,
            InMemoryLogRecordExporter,
            SimpleLogRecordProcessor,
        )
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        resource = Resource.create(
            {"service.name": f"instrumented-{scenario.name}", "ctxview.test.scenario": scenario.name}
        )
        self.tracer_provider = TracerProvider(resource=resource)
        self.logger_provider = LoggerProvider(resource=resource)
        self.span_memory = InMemorySpanExporter()
        self.log_memory = InMemoryLogRecordExporter()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.span_memory))
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.log_memory))
        self.span_exporter = self.log_exporter = None
        if endpoint:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            headers = {"Authorization": f"Bearer {key}"}
            base = endpoint.rstrip("/")
            self.span_exporter = _counting_span_exporter(
                OTLPSpanExporter(endpoint=f"{base}/v1/traces", headers=headers, timeout=10)
            )
            self.log_exporter = _counting_log_exporter(
                OTLPLogExporter(endpoint=f"{base}/v1/logs", headers=headers, timeout=10)
            )
            self.tracer_provider.add_span_processor(BatchSpanProcessor(self.span_exporter))
            self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(self.log_exporter))
        # Global too: Pydantic AI and some instrumentations use the global providers.
        trace.set_tracer_provider(self.tracer_provider)
        _logs.set_logger_provider(self.logger_provider)

    def finish(self) -> None:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()

    def export_counts(self) -> dict[str, int]:
        counts = {"spans": 0, "logs": 0, "failed_span_exports": 0, "failed_log_exports": 0}
        if self.span_exporter is not None:
            counts["spans"] = self.span_exporter.exported
            counts["failed_span_exports"] = self.span_exporter.failures
            counts["logs"] = self.log_exporter.exported
            counts["failed_log_exports"] = self.log_exporter.failures
        return counts


def _counting_span_exporter(inner):
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class CountingSpanExporter(SpanExporter):
        exported = failures = 0

        def export(self, spans):
            result = inner.export(spans)
            if result == SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failures += 1
            return result

        def shutdown(self):
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return CountingSpanExporter()


def _counting_log_exporter(inner):
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    class CountingLogExporter(LogRecordExporter):
        exported = failures = 0

        def export(self, batch):
            result = inner.export(batch)
            if result == LogRecordExportResult.SUCCESS:
                self.exported += len(batch)
            else:
                self.failures += 1
            return result

        def shutdown(self):
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return CountingLogExporter()


def instrument(scenario: Scenario, telemetry: Telemetry) -> None:
    providers = {"tracer_provider": telemetry.tracer_provider}
    if scenario.instrumentation == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(**providers, logger_provider=telemetry.logger_provider)
    elif scenario.instrumentation == "openinference-openai":
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(**providers)
    elif scenario.instrumentation == "openinference-anthropic":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument(**providers)
    elif scenario.instrumentation == "openllmetry-anthropic":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

        AnthropicInstrumentor().instrument(**providers, logger_provider=telemetry.logger_provider)
    elif scenario.instrumentation == "anthropic-sdk":
        pass  # the SDK traces itself once a global tracer provider is set
    elif scenario.instrumentation == "pydantic-ai":
        from pydantic_ai import Agent

        Agent.instrument_all()  # uses the global tracer provider set above
    elif scenario.instrumentation == "openinference-openai-agents":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        # Exclusive (the default): replaces the SDK's own processor, which would upload to OpenAI.
        OpenAIAgentsInstrumentor().instrument(**providers)
    elif scenario.instrumentation == "google-genai":
        from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

        GoogleGenAiSdkInstrumentor().instrument(**providers, logger_provider=telemetry.logger_provider)
    elif scenario.instrumentation == "openllmetry-openai":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(**providers, logger_provider=telemetry.logger_provider)
    elif scenario.instrumentation == "openinference-llama-index":
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

        LlamaIndexInstrumentor().instrument(**providers)
    else:
        raise ValueError(f"unknown instrumentation {scenario.instrumentation!r}")


# ---------------------------------------------------------------------------------------------
# Scripted replies and the conversation drivers
# ---------------------------------------------------------------------------------------------
def scripted_replies(scenario: Scenario) -> list[fp.Reply]:
    replies = []
    for call in scenario.calls:
        if scenario.provider == "openai-responses":
            replies.append(
                fp.responses_reply(
                    id=call.response_id,
                    model=OPENAI_RESPONSE_MODEL,
                    usage=call.usage,
                    text=call.text,
                    tool_calls=list(call.tool_calls),
                )
            )
        elif scenario.provider == "gemini":
            replies.append(
                fp.gemini_reply(
                    id=call.response_id,
                    model=GEMINI_MODEL,
                    model_version=GEMINI_RESPONSE_MODEL,
                    usage=call.usage,
                    text=call.text,
                    tool_calls=list(call.tool_calls),
                )
            )
        elif scenario.provider == "openai":
            replies.append(
                fp.openai_reply(
                    id=call.response_id,
                    model=OPENAI_RESPONSE_MODEL,
                    usage=call.usage,
                    text=call.text,
                    tool_calls=list(call.tool_calls),
                )
            )
        else:
            replies.append(
                fp.anthropic_reply(
                    id=call.response_id,
                    model=ANTHROPIC_RESPONSE_MODEL,
                    usage=call.usage,
                    text=call.text,
                    tool_uses=list(call.tool_calls),
                    extra=call.response_extra,
                )
            )
    return replies


def _turns(scenario: Scenario):
    """(turn number, user text, the scripted calls of that turn)."""
    for number, text in enumerate(scenario.user_turns, 1):
        yield number, text, [call for call in scenario.calls if call.turn == number]


def drive_openai_sdk(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    import openai

    client = openai.OpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
    tools = [{"type": "function", "function": tool} for tool in TOOLS]
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    for number, text, calls in _turns(scenario):
        with tracer.start_as_current_span("agent turn", attributes={"app.turn.index": number}):
            messages.append({"role": "user", "content": text})
            for call in calls:
                request = dict(model=OPENAI_MODEL, messages=list(messages), tools=tools, temperature=0.2)
                if call.stream:
                    stream = client.chat.completions.create(
                        **request, stream=True, stream_options={"include_usage": True}
                    )
                    content, tool_calls = _read_chat_stream(stream)
                else:
                    message = client.chat.completions.create(**request).choices[0].message
                    content = message.content
                    tool_calls = [
                        {
                            "id": tool_call.id,
                            "type": "function",
                            "function": {
                                "name": tool_call.function.name,
                                "arguments": tool_call.function.arguments,
                            },
                        }
                        for tool_call in message.tool_calls or []
                    ]
                assistant: dict[str, Any] = {"role": "assistant", "content": content}
                if tool_calls:
                    assistant["tool_calls"] = tool_calls
                messages.append(assistant)
                for tool_call in tool_calls:
                    result = TOOL_RESULTS[tool_call["function"]["name"]]
                    messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": result})


def _read_chat_stream(stream) -> tuple[str | None, list[dict]]:
    """Consume a Chat Completions stream to the end (so the instrumentation ends its span)."""
    text: list[str] = []
    calls: dict[int, dict] = {}
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(
                    delta.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                entry["id"] = delta.id or entry["id"]
                if delta.function is not None:
                    entry["function"]["name"] += delta.function.name or ""
                    entry["function"]["arguments"] += delta.function.arguments or ""
    return ("".join(text) or None), [calls[index] for index in sorted(calls)]


def drive_anthropic_sdk(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=fake.anthropic_base_url, api_key="sk-ant-fake-test", max_retries=0)
    system = [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}]
    tools = [
        {"name": tool["name"], "description": tool["description"], "input_schema": tool["parameters"]}
        for tool in TOOLS
    ]
    messages: list[dict[str, Any]] = []
    beta = scenario.driver == "anthropic_beta"
    if beta:
        # One session across both turns (OpenInference's session.id on every span), so call 3 is
        # compared with call 2 and the context edit before it is seen where it cut the cache.
        from openinference.instrumentation import using_session

        session = using_session(DIAGNOSIS_SESSION)
    else:
        session = contextlib.nullcontext()
    with session:
        _anthropic_turns(scenario, client, tracer, system, tools, messages, beta)


def _anthropic_turns(scenario, client, tracer, system, tools, messages, beta) -> None:
    previous_id = None
    for number, text, calls in _turns(scenario):
        with tracer.start_as_current_span("agent turn", attributes={"app.turn.index": number}):
            messages.append({"role": "user", "content": text})
            for call in calls:
                request = dict(
                    model=ANTHROPIC_MODEL,
                    max_tokens=1024,
                    system=system,
                    tools=tools,
                    messages=list(messages),
                )
                if beta:
                    # Context editing clears old tool results server-side; the diagnosis compares
                    # this request with the previous one.
                    request["betas"] = ["context-management-2025-06-27"]
                    request["context_management"] = {"edits": [{"type": "clear_tool_uses_20250919"}]}
                    if previous_id:
                        request["diagnostics"] = {"previous_message_id": previous_id}
                    message = client.beta.messages.create(**request)
                elif call.stream:
                    with client.messages.stream(**request) as stream:
                        for _ in stream.text_stream:
                            pass
                        message = stream.get_final_message()
                else:
                    message = client.messages.create(**request)
                previous_id = message.id
                content = []
                for block in message.content:
                    if block.type == "text":
                        content.append({"type": "text", "text": block.text})
                    elif block.type == "tool_use":
                        content.append(
                            {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                        )
                messages.append({"role": "assistant", "content": content})
                results = [
                    {"type": "tool_result", "tool_use_id": block.id, "content": TOOL_RESULTS[block.name]}
                    for block in message.content
                    if block.type == "tool_use"
                ]
                if results:
                    messages.append({"role": "user", "content": results})


def drive_pydantic_ai(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    from pydantic_ai import Agent

    if scenario.provider == "openai":
        from openai import AsyncOpenAI
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
        model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(openai_client=client))
    else:
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        client = AsyncAnthropic(base_url=fake.anthropic_base_url, api_key="sk-ant-fake-test", max_retries=0)
        model = AnthropicModel(ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=client))

    agent = Agent(model, instructions=SYSTEM_PROMPT, name="travel_agent")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return TOOL_RESULTS["get_weather"]

    @agent.tool_plain
    def get_time(city: str) -> str:
        """Current local time in a city."""
        return TOOL_RESULTS["get_time"]

    history = None
    for _number, text, _calls in _turns(scenario):
        result = agent.run_sync(text, message_history=history)
        history = result.all_messages()


def drive_openai_responses(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    """The same conversation through ``client.responses.create``, the history kept as input items."""
    import openai

    client = openai.OpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
    tools = [{"type": "function", **tool} for tool in TOOLS]
    items: list[dict[str, Any]] = []
    for number, text, calls in _turns(scenario):
        with tracer.start_as_current_span("agent turn", attributes={"app.turn.index": number}):
            items.append({"role": "user", "content": text})
            for _ in calls:
                response = client.responses.create(
                    model=OPENAI_MODEL, instructions=SYSTEM_PROMPT, input=list(items), tools=tools
                )
                for item in response.output:
                    items.append(item.model_dump(exclude_none=True))
                    if item.type == "function_call":
                        result = TOOL_RESULTS[item.name]
                        items.append(
                            {"type": "function_call_output", "call_id": item.call_id, "output": result}
                        )


def drive_google_genai(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    """The conversation through ``client.models.generate_content``, tools declared, calls run by hand."""
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="fake-gemini-key", http_options=types.HttpOptions(base_url=fake.url))
    config = types.GenerateContentConfig(
        system_instruction=SYSTEM_PROMPT,
        temperature=0.2,
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration(**tool) for tool in TOOLS])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents: list[types.Content] = []
    for number, text, calls in _turns(scenario):
        with tracer.start_as_current_span("agent turn", attributes={"app.turn.index": number}):
            contents.append(types.Content(role="user", parts=[types.Part.from_text(text=text)]))
            for _ in calls:
                response = client.models.generate_content(
                    model=GEMINI_MODEL, contents=list(contents), config=config
                )
                contents.append(response.candidates[0].content)
                results = [
                    types.Part.from_function_response(
                        name=part.function_call.name,
                        response={"result": TOOL_RESULTS[part.function_call.name]},
                    )
                    for part in response.candidates[0].content.parts
                    if part.function_call
                ]
                if results:
                    contents.append(types.Content(role="user", parts=results))


def _agents_model(fake: fp.FakeProvider):
    """openai-agents' Responses model on a client of the fake (the SDK's default API)."""
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)
    return OpenAIResponsesModel(OPENAI_MODEL, openai_client=client)


def _agents_tools():
    from agents import function_tool

    @function_tool
    def lookup_customer(email: str) -> str:
        """Find the customer account for an e-mail address."""
        return json.dumps(CUSTOMER)

    @function_tool
    def get_invoice(month: str) -> str:
        """The customer's invoice for a month, with its charges."""
        return json.dumps(INVOICE)

    return lookup_customer, get_invoice


def drive_openai_agents_handoff(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    import asyncio

    from agents import Agent, Runner

    model = _agents_model(fake)
    lookup_customer, get_invoice = _agents_tools()
    billing = Agent(name="billing_agent", instructions=BILLING_INSTRUCTIONS, tools=[get_invoice], model=model)
    triage = Agent(
        name="triage_agent",
        instructions=TRIAGE_INSTRUCTIONS,
        tools=[lookup_customer],
        handoffs=[billing],
        model=model,
    )
    asyncio.run(Runner.run(triage, scenario.user_turns[0]))


def drive_openai_agents_as_tool(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    import asyncio

    from agents import Agent, Runner

    model = _agents_model(fake)
    lookup_customer, get_invoice = _agents_tools()
    billing = Agent(name="billing_agent", instructions=BILLING_INSTRUCTIONS, tools=[get_invoice], model=model)
    orchestrator = Agent(
        name="orchestrator",
        instructions=ORCHESTRATOR_INSTRUCTIONS,
        tools=[
            billing.as_tool(tool_name="ask_billing_agent", tool_description="Ask the billing agent."),
            lookup_customer,
        ],
        model=model,
    )
    asyncio.run(Runner.run(orchestrator, scenario.user_turns[0]))


def drive_pydantic_ai_delegation(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    """The planner's tool runs the weather expert with ``usage=ctx.usage`` (pydantic-ai's delegation)."""
    from anthropic import AsyncAnthropic
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(base_url=fake.anthropic_base_url, api_key="sk-ant-fake-test", max_retries=0)
    model = AnthropicModel(ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=client))
    expert = Agent(model, instructions=EXPERT_INSTRUCTIONS, name="weather_expert")
    planner = Agent(model, instructions=PLANNER_INSTRUCTIONS, name="planner")

    @expert.tool_plain
    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return TOOL_RESULTS["get_weather"]

    async def ask_weather_expert(ctx: RunContext[None], question: str) -> str:
        """Ask the weather expert a question."""
        result = await expert.run(question, usage=ctx.usage)
        return result.output

    # This module's annotations are strings (PEP 563) that pydantic-ai resolves in the module's
    # globals, where RunContext is not imported: give it the real objects.
    ask_weather_expert.__annotations__ = {"ctx": RunContext[None], "question": str, "return": str}
    planner.tool(ask_weather_expert)

    if scenario.dynamic_instructions:
        steps = iter(range(1, 100))

        # Instructions are rendered for every request, so the planner's second call sends a new
        # system prompt: a real cache break, unlike the switch to the expert and back.
        @planner.instructions
        def planning_step() -> str:
            return f"Planning step {next(steps)}."

    planner.run_sync(scenario.user_turns[0])


def drive_pydantic_ai_researcher_twice(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    """Two user turns; in each the lead's tool runs the researcher (a new run, so a new invocation)."""
    from anthropic import AsyncAnthropic
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = AsyncAnthropic(base_url=fake.anthropic_base_url, api_key="sk-ant-fake-test", max_retries=0)
    model = AnthropicModel(ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=client))
    researcher = Agent(model, instructions=RESEARCHER_INSTRUCTIONS, name="researcher")
    lead = Agent(model, instructions=LEAD_INSTRUCTIONS, name="lead")

    @researcher.tool_plain
    def search_facts(query: str) -> str:
        """Search a reference of physical facts."""
        return "boiling point tables"

    async def ask_researcher(ctx: RunContext[None], question: str) -> str:
        """Ask the researcher to look a fact up."""
        result = await researcher.run(question, usage=ctx.usage)
        return result.output

    ask_researcher.__annotations__ = {"ctx": RunContext[None], "question": str, "return": str}
    lead.tool(ask_researcher)

    history = None
    for _number, text, _calls in _turns(scenario):
        result = lead.run_sync(text, message_history=history)
        history = result.all_messages()


def drive_llama_index_function_agent(scenario: Scenario, fake: fp.FakeProvider, tracer) -> None:
    """The shared conversation through LlamaIndex's FunctionAgent (it streams every request)."""
    import asyncio

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.workflow import Context
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model=OPENAI_MODEL, api_base=fake.openai_base_url, api_key="sk-fake-test", max_retries=0)

    def get_weather(city: str) -> str:
        """Current weather in a city."""
        return TOOL_RESULTS["get_weather"]

    def get_time(city: str) -> str:
        """Current local time in a city."""
        return TOOL_RESULTS["get_time"]

    agent = FunctionAgent(
        tools=[get_weather, get_time], llm=llm, system_prompt=SYSTEM_PROMPT, name="travel_agent"
    )

    async def conversation() -> None:
        context = Context(agent)
        for _number, text, _calls in _turns(scenario):
            await agent.run(text, ctx=context)

    asyncio.run(conversation())


DRIVERS = {
    "openai_sdk": drive_openai_sdk,
    "anthropic_sdk": drive_anthropic_sdk,
    "anthropic_beta": drive_anthropic_sdk,  # the beta API, context editing and cache diagnostics
    "pydantic_ai": drive_pydantic_ai,
    "openai_responses": drive_openai_responses,
    "google_genai": drive_google_genai,
    "openai_agents_handoff": drive_openai_agents_handoff,
    "openai_agents_as_tool": drive_openai_agents_as_tool,
    "pydantic_ai_delegation": drive_pydantic_ai_delegation,
    "pydantic_ai_researcher_twice": drive_pydantic_ai_researcher_twice,
    "llama_index_function_agent": drive_llama_index_function_agent,
}


# ---------------------------------------------------------------------------------------------
# Running and describing
# ---------------------------------------------------------------------------------------------
def execute(scenario: Scenario, endpoint: str | None, key: str | None, capture: Path | None) -> dict:
    telemetry = Telemetry(scenario, endpoint, key)
    instrument(scenario, telemetry)
    tracer = telemetry.tracer_provider.get_tracer(APP_SCOPE)
    error = None
    with fp.FakeProvider(scripted_replies(scenario)) as fake:
        try:
            DRIVERS[scenario.driver](scenario, fake, tracer)
        except Exception as exc:  # reported in the description, then the process exits 1
            traceback.print_exc()
            error = f"{type(exc).__name__}: {exc}"
        telemetry.finish()
    description = describe(scenario, telemetry, fake, error)
    if capture is not None:
        if description["problems"]:
            print(f"not writing {capture}: the run had problems", file=sys.stderr)
        else:
            write_fixture(capture, scenario, telemetry, description)
    return description


MODELS = {
    "openai": {"request": OPENAI_MODEL, "response": OPENAI_RESPONSE_MODEL},
    "openai-responses": {"request": OPENAI_MODEL, "response": OPENAI_RESPONSE_MODEL},
    "anthropic": {"request": ANTHROPIC_MODEL, "response": ANTHROPIC_RESPONSE_MODEL},
    "gemini": {"request": GEMINI_MODEL, "response": GEMINI_RESPONSE_MODEL},
}


def _system_prompt(body: Any) -> str | None:
    """The system prompt a request sent, in any of the four APIs: what decides a genuine cache break."""
    if not isinstance(body, dict):
        return None
    if "system" in body:  # Anthropic: a string or text blocks
        system = body["system"]
        return system if isinstance(system, str) else "".join(block.get("text", "") for block in system)
    if "instructions" in body:  # Responses
        return body["instructions"]
    if "systemInstruction" in body:  # Gemini
        return "".join(part.get("text", "") for part in body["systemInstruction"].get("parts", []))
    for message in body.get("messages") or []:  # Chat Completions
        if message.get("role") in ("system", "developer"):
            return (
                message["content"] if isinstance(message["content"], str) else json.dumps(message["content"])
            )
    return None


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def describe(scenario: Scenario, telemetry: Telemetry, fake: fp.FakeProvider, error: str | None) -> dict:
    """What the scenario did: per model call, in order, the scripted usage and the span that recorded it."""
    spans = sorted(telemetry.span_memory.get_finished_spans(), key=lambda span: span.start_time)
    records = telemetry.log_memory.get_finished_logs()
    by_scope: dict[str, list] = {}
    for span in spans:
        if is_model_call(dict(span.attributes or {})) and span.name not in scenario.preparing_spans:
            by_scope.setdefault(span.instrumentation_scope.name, []).append(span)
    problems = [f"fake provider: {message}" for message in fake.errors]
    if error:
        problems.append(f"conversation failed: {error}")
    if fake.pending:
        problems.append(f"{fake.pending} scripted replies were never requested")
    for scope in sorted(set(by_scope) | set(scenario.scopes)):
        found = len(by_scope.get(scope, []))
        if scope not in scenario.scopes:
            problems.append(f"{found} unexpected model-call spans of scope {scope}")
        elif found != len(scenario.calls):
            problems.append(f"{found} model-call spans of scope {scope} for {len(scenario.calls)} calls")

    log_summaries = []
    for record in records:
        log_record = getattr(record, "log_record", record)
        log_summaries.append(
            {
                "event_name": getattr(log_record, "event_name", None)
                or (log_record.attributes or {}).get("event.name"),
                "trace_id": _hex(log_record.trace_id or 0, 32),
                "span_id": _hex(log_record.span_id or 0, 16),
                "scope": record.instrumentation_scope.name if record.instrumentation_scope else None,
            }
        )

    def span_info(span) -> dict:
        return {
            "trace_id": _hex(span.context.trace_id, 32),
            "span_id": _hex(span.context.span_id, 16),
            "name": span.name,
            "scope": span.instrumentation_scope.name,
        }

    calls = []
    provider_requests = [request for request in fake.requests if not request.error]
    for index, script in enumerate(scenario.calls):
        recorded = {}
        for scope in scenario.scopes:
            scope_spans = by_scope.get(scope, [])
            if index < len(scope_spans):
                recorded[scope] = span_info(scope_spans[index])
                response_id = (scope_spans[index].attributes or {}).get("gen_ai.response.id")
                if response_id is not None and response_id != script.response_id:
                    problems.append(f"call {index}: {scope} span has response id {response_id}")
        primary = recorded.get(scenario.scope)
        calls.append(
            {
                "index": index,
                "turn": script.turn,
                "step": script.step,
                "response_id": script.response_id,
                "streamed": provider_requests[index].streamed if index < len(provider_requests) else None,
                "finish_reason": script.finish_reason,
                "agent": script.agent,
                "tool_calls": [{"id": i, "name": n, "arguments": a} for i, n, a in script.tool_calls],
                "usage": script.usage,
                "canonical": canonical_usage(scenario.provider, script.usage),
                "span": primary,
                "other_spans": [info for scope, info in recorded.items() if scope != scenario.scope],
                "log_records": [
                    entry["event_name"]
                    for entry in log_summaries
                    if primary is not None and entry["span_id"] == primary["span_id"]
                ],
            }
        )

    turns = []
    for number, text in enumerate(scenario.user_turns, 1):
        members = [call for call in calls if call["turn"] == number]
        turns.append(
            {
                "turn": number,
                "user": text,
                "calls": [call["index"] for call in members],
                "trace_ids": sorted({call["span"]["trace_id"] for call in members if call["span"]}),
            }
        )

    counts = telemetry.export_counts()
    if counts["failed_span_exports"] or counts["failed_log_exports"]:
        problems.append(f"exports failed: {counts}")

    versions = {}
    for package in (*scenario.packages, "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None

    return {
        "scenario": scenario.name,
        "summary": scenario.summary,
        "provider": scenario.provider,
        "instrumentation": scenario.instrumentation,
        "scope": scenario.scope,
        "driver": scenario.driver,
        "env": scenario.env,
        "packages": versions,
        "service_name": f"instrumented-{scenario.name}",
        "models": MODELS[scenario.provider],
        "system_prompt": SYSTEM_PROMPT,
        "turns": turns,
        "calls": calls,
        "spans": [
            {
                "name": span.name,
                "trace_id": _hex(span.context.trace_id, 32),
                "span_id": _hex(span.context.span_id, 16),
                "parent_span_id": _hex(span.parent.span_id, 16) if span.parent else "",
                "kind": span.kind.value + 1,  # the OTLP number (SDK INTERNAL=0 is OTLP 1)
                "scope": span.instrumentation_scope.name,
                "model_call": is_model_call(dict(span.attributes or {})),
            }
            for span in spans
        ],
        "log_records": log_summaries,
        "provider_requests": [
            {
                "path": request.path,
                "streamed": request.streamed,
                "error": request.error,
                "system": _system_prompt(request.body),
            }
            for request in fake.requests
        ],
        "exported": counts,
        "problems": problems,
    }


# ---------------------------------------------------------------------------------------------
# Fixtures: what the exporters sent, as OTLP/JSON
# ---------------------------------------------------------------------------------------------
_ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


def _otlp_json(message) -> dict:
    """A protobuf export request as OTLP/JSON: camelCase, enums as numbers, ids as hex."""
    from google.protobuf.json_format import MessageToDict

    document = MessageToDict(message, use_integers_for_enums=True)

    def fix(node):
        if isinstance(node, dict):
            for name, value in node.items():
                if name in _ID_FIELDS and isinstance(value, str):
                    node[name] = base64.b64decode(value).hex()
                else:
                    fix(value)
        elif isinstance(node, list):
            for item in node:
                fix(item)

    fix(document)
    return document


def write_fixture(path: Path, scenario: Scenario, telemetry: Telemetry, description: dict) -> None:
    """Encode the finished spans and records with the encoder the OTLP/HTTP exporter uses, as JSON."""
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = sorted(telemetry.span_memory.get_finished_spans(), key=lambda span: span.start_time)
    records = telemetry.log_memory.get_finished_logs()
    document = {
        "scenario": scenario.name,
        "note": (
            "Captured from the real instrumentation by tests/instrumented/run.py; regenerate with "
            "`python -m tests.instrumented.run --all --capture-dir tests/data/otlp`. 'traces' and "
            "'logs' are OTLP/JSON export request bodies; 'description' is what the scenario did, "
            "with each call's scripted provider usage and the figures a normaliser should produce."
        ),
        "description": {k: v for k, v in description.items() if k != "stderr"},
        "traces": _otlp_json(encode_spans(spans)),
        "logs": _otlp_json(encode_logs(records)) if records else None,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.instrumented.run", description=__doc__.split("\n")[0]
    )
    parser.add_argument("scenario", nargs="?", choices=sorted(SCENARIOS))
    parser.add_argument("--endpoint", help="ctxview base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--key", help="ingest key sent as Authorization: Bearer <key>")
    parser.add_argument("--capture", type=Path, help="write the exported telemetry to this OTLP/JSON file")
    parser.add_argument("--all", action="store_true", help="run every scenario, each in a subprocess")
    parser.add_argument("--capture-dir", type=Path, help="with --all: write <scenario>.json files here")
    parser.add_argument("--list", action="store_true", help="list the scenarios")
    args = parser.parse_args(argv)

    if args.list:
        for name, scenario in SCENARIOS.items():
            print(f"{name:26} {scenario.summary}")
        return 0
    if args.all:
        directory = args.capture_dir
        failed = 0
        for name in SCENARIOS:
            capture = directory / f"{name}.json" if directory else None
            try:
                result = run_scenario(name, args.endpoint, args.key, capture=capture)
                print(
                    f"{name}: {len(result['calls'])} calls, {len(result['spans'])} spans, "
                    f"{len(result['log_records'])} log records" + (f" -> {capture}" if capture else "")
                )
            except ScenarioError as exc:
                failed += 1
                print(f"{name}: FAILED\n{exc}", file=sys.stderr)
        return 1 if failed else 0
    if not args.scenario:
        parser.error("name a scenario, or use --all or --list")
    if args.endpoint and not args.key:
        parser.error("--endpoint needs --key")

    scenario = SCENARIOS[args.scenario]
    prepare_environment(scenario)
    description = execute(scenario, args.endpoint, args.key, args.capture)
    print(RESULT_MARKER + json.dumps(description), flush=True)
    if description["problems"]:
        print("problems:\n  " + "\n  ".join(description["problems"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
