"""One-line recording: a provider request and its response in, one finished call out."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from .call import Call
from .manifest import Excluded
from .usage import as_mapping

logger = logging.getLogger("ctxview_sdk")

ExcludedLike = Excluded | Mapping[str, Any] | tuple[str, str]


def record_anthropic(
    run_id: str,
    turn: int,
    request: Mapping[str, Any],
    response: Any = None,
    excluded: Iterable[ExcludedLike] = (),
    **options: Any,
) -> Call:
    """Record an Anthropic Messages call from its request dict and its response (Message or dict)."""
    return _record(run_id, turn, request, response, excluded, options, "anthropic", Call.items_from_anthropic)


def record_openai(
    run_id: str,
    turn: int,
    request: Mapping[str, Any],
    response: Any = None,
    excluded: Iterable[ExcludedLike] = (),
    **options: Any,
) -> Call:
    """Record an OpenAI Chat Completions (or Responses) call from its request dict and its response."""
    return _record(run_id, turn, request, response, excluded, options, "openai", Call.items_from_openai)


def ask_cache_diagnostics(request: Mapping[str, Any], previous: Any) -> dict[str, Any]:
    """The Anthropic request asking for the cache diagnosis against ``previous`` (opt-in).

    ``previous`` is the run's previous response (a Message or dict) or its id; None leaves the request as
    it is. The response then says why the prompt cache could not reuse that request's prefix
    (``diagnostics.cache_miss_reason``), and ``record_anthropic`` sends it: ctxview shows it beside its
    own cause. Returns a new dict; the request given is not changed."""
    if not isinstance(request, Mapping):
        raise ValueError(f"request must be a dict, got {type(request).__name__}")
    if previous is None:
        return dict(request)
    previous_id = previous if isinstance(previous, str) else (as_mapping(previous) or {}).get("id")
    if not (isinstance(previous_id, str) and previous_id):
        raise ValueError(f"previous must be a response with an id, or an id, got {previous!r}")
    return {**request, "diagnostics": {"previous_message_id": previous_id}}


def _record(
    run_id: str,
    turn: int,
    request: Mapping[str, Any],
    response: Any,
    excluded: Iterable[ExcludedLike],
    options: dict[str, Any],
    provider: str,
    add_items: Any,
) -> Call:
    """Options: provider, model, prompt_version, start_time, end_time, budget (a dict like set_budget)."""
    unknown = set(options) - {"provider", "model", "prompt_version", "start_time", "end_time", "budget"}
    if unknown:
        raise ValueError(f"unknown options: {', '.join(sorted(unknown))}")
    if not isinstance(request, Mapping):
        raise ValueError(f"request must be a dict, got {type(request).__name__}")
    model = options.get("model") or request.get("model") or "unknown"
    call = Call(
        run_id,
        turn,
        str(model),
        provider=options.get("provider") or provider,
        prompt_version=options.get("prompt_version"),
        start_time=options.get("start_time"),
    )
    budget = options.get("budget") or {}
    if not isinstance(budget, Mapping):
        raise ValueError(f"budget must be a dict with limit, input and reserved_output, got {budget!r}")
    call.set_budget(
        limit=budget.get("limit"), input=budget.get("input"), reserved_output=budget.get("reserved_output")
    )
    add_items(call, request)
    for entry in excluded:
        if isinstance(entry, Excluded):
            call.exclude(entry.id, entry.reason, entry.tokens, entry.kind, entry.source, entry.version)
        elif isinstance(entry, Mapping):
            unknown = set(entry) - {"id", "reason", "tokens", "kind", "source", "version"}
            if unknown:
                raise ValueError(f"unknown excluded fields: {', '.join(sorted(unknown))}")
            call.exclude(**entry)
        elif isinstance(entry, tuple) and len(entry) == 2:
            call.exclude(*entry)
        else:
            raise ValueError(
                f"an excluded entry must be an Excluded, a dict or an (id, reason) pair, got {entry!r}"
            )
    if response is not None:
        _read_response(call, response)
    call.end(end_time=options.get("end_time"))
    return call


def _read_response(call: Call, response: Any) -> None:
    """Model, id, finish reasons and usage from an Anthropic or OpenAI response (object or dict)."""
    try:
        data = as_mapping(response)
        if data is None:
            logger.warning("ctxview_sdk: ignoring a response of type %s", type(response).__name__)
            return
        reasons = None
        if data.get("stop_reason") is not None:  # Anthropic
            reasons = [data["stop_reason"]]
        elif isinstance(data.get("choices"), list):  # OpenAI Chat Completions
            choices = [as_mapping(choice) or {} for choice in data["choices"]]
            reasons = [choice["finish_reason"] for choice in choices if choice.get("finish_reason")]
        call.set_response(model=data.get("model"), response_id=data.get("id"), finish_reasons=reasons or None)
        for tool_call in _tool_calls(data):
            call.add_tool_call(**tool_call)
        if data.get("usage") is not None:
            call.set_usage(data["usage"])
        _read_cache_diagnosis(call, data)
    except Exception:
        logger.exception("ctxview_sdk: could not read the response")


def _read_cache_diagnosis(call: Call, data: Mapping[str, Any]) -> None:
    """Anthropic's ``diagnostics.cache_miss_reason``, when the request asked for it and it is ready."""
    reason = as_mapping((as_mapping(data.get("diagnostics")) or {}).get("cache_miss_reason")) or {}
    if isinstance(reason.get("type"), str) and reason["type"]:
        missed = reason.get("cache_missed_input_tokens")
        valid = isinstance(missed, int) and not isinstance(missed, bool) and missed >= 0
        call.set_cache_diagnosis(reason["type"], missed if valid else None)


def _tool_calls(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of an Anthropic (tool_use blocks) or OpenAI (message.tool_calls) response."""
    calls = []
    for block in data.get("content") or []:
        block = as_mapping(block) or {}
        if block.get("type") == "tool_use" and block.get("name"):
            calls.append({"name": block["name"], "id": block.get("id"), "arguments": block.get("input")})
    for choice in data.get("choices") or []:
        message = as_mapping((as_mapping(choice) or {}).get("message")) or {}
        for tool_call in message.get("tool_calls") or []:
            tool_call = as_mapping(tool_call) or {}
            function = as_mapping(tool_call.get("function")) or {}
            if function.get("name"):
                calls.append(
                    {
                        "name": function["name"],
                        "id": tool_call.get("id"),
                        "arguments": function.get("arguments"),
                    }
                )
    return calls
