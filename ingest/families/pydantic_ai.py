"""pydantic-ai's own instrumentation (``Agent.instrument_all()``): OTel GenAI spans plus its quirks.

Tool definitions in ``model_request_parameters``; agent runs named "agent run" in instrumentation format
v2 (before ``invoke_agent``); usage duplicated into ``gen_ai.usage.details.*`` (OpenAI's reasoning only
there); zero figures left out (``providers.INSTRUMENTATIONS``).
"""

from ingest import semconv
from ingest.families.base import AGENT, Family, Read, UsageKeys
from ingest.families.messages import parse_json

REQUEST_PARAMETERS = "model_request_parameters"
LEGACY_AGENT_SPAN = "agent run"


def kind_of(name: str, attributes: dict) -> str | None:
    if name == LEGACY_AGENT_SPAN and not attributes.get(semconv.OPERATION_NAME):
        return AGENT
    return None


def tools(attributes: dict, content: dict) -> Read:
    parameters = parse_json(attributes.get(REQUEST_PARAMETERS))
    if isinstance(parameters, dict) and isinstance(parameters.get("function_tools"), list):
        return [tool for tool in parameters["function_tools"] if isinstance(tool, dict)], []
    return None, []


FAMILY = Family(
    name="pydantic-ai",
    kind_of=kind_of,
    tools=tools,
    other_content_keys=("pydantic_ai.all_messages",),
    usage=UsageKeys(
        cache_read=("gen_ai.usage.details.cache_read_tokens",),
        cache_write=("gen_ai.usage.details.cache_write_tokens",),
        reasoning=("gen_ai.usage.details.reasoning_tokens",),  # OpenAI's reasoning figure is only here
    ),
)
