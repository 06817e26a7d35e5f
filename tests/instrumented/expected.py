"""What ctxview should make of each scenario's usage: the provider's figures (``canonical``), less what
the instrumentation does not emit, plus what it gets wrong in a way we keep as reported."""

USAGE_FIELDS = ("uncached", "cache_write", "cache_read", "output", "reasoning", "prompt_total")


def expected_usage(scenario: str, call: dict) -> dict:
    canonical = call["canonical"]
    usage = {
        "uncached": canonical["uncached_input"],
        "cache_write": canonical["cache_write"],
        "cache_read": canonical["cache_read"],
        "output": canonical["output"],
        "reasoning": canonical["reasoning"],
        "prompt_total": canonical["input_total"],
    }
    if scenario.startswith("openai-v2"):
        # The Chat Completions path of openai-v2 emits only the inclusive input and the output.
        usage.update(uncached=None, cache_write=None, cache_read=None, reasoning=None)
    if scenario == "openinference-llama-index-agent":
        # LlamaIndex's OpenAI LLM streams without stream_options.include_usage: the API sends no usage.
        usage = dict.fromkeys(usage)
    if scenario == "openllmetry-anthropic" and call["streamed"]:
        # OpenLLMetry adds message_start's output figure to the final cumulative one (133 -> 134).
        usage["output"] += 1
    return usage
