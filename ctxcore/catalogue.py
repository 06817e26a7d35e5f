"""The catalogues: every finding type and every cache-break cause ctxview knows, in one place. No Django.

Everything said about a finding type or a cause is derived from here: the help beside it in the UI, the
fix a finding carries, the template that shows its evidence, the OpenAPI enums, the README's lists and the
tests' lists. Code that raises a finding or names a cause looks it up at import time (``finding_type``,
``cause``), so a name missing here fails when the module is imported, never inside a task.
"""

from dataclasses import dataclass

SEVERITIES = ("error", "warning", "info")
SEVERITY_ORDER = {name: rank for rank, name in enumerate(SEVERITIES)}


@dataclass(frozen=True)
class Cause:
    """Why a call could not reuse the prompt cache its run had built."""

    name: str
    area: str | None  # the part of the request it lies in (model, tools, system, history), if one
    title: str
    help: str
    fix: str

    @property
    def detail_template(self) -> str:
        """The template that shows this cause's details on a call's page (templates/causes/)."""
        return f"causes/{self.name}.html"


@dataclass(frozen=True)
class FindingType:
    """Something worth a person's attention, raised by the analyses."""

    name: str
    severity: str  # the usual severity; a rule may lower it (e.g. a break below the minimum is info)
    title: str
    help: str
    fix: str | None  # None: the fix is the cause's (findings that carry a cache-break cause)

    @property
    def evidence_template(self) -> str:
        """The template that shows this type's evidence in a few words (templates/findings/evidence/)."""
        return f"findings/evidence/{self.name}.html"


CAUSES: dict[str, Cause] = {
    entry.name: entry
    for entry in (
        Cause(
            "tools_changed",
            "tools",
            "Tool catalogue changed",
            "the tool catalogue changed (a tool added, removed, reordered or its schema edited)",
            "Keep the tool catalogue byte-identical and in a fixed order for the whole run; add tools only "
            "after the cached prefix or in a new run.",
        ),
        Cause(
            "volatile_system_prompt",
            "system",
            "Volatile system prompt",
            "the system prompt carries a changing value (a date, time, id or counter)",
            "Move the changing value (date, time, id, counter) out of the system prompt into the latest "
            "message, so the cached prefix stays byte-identical.",
        ),
        Cause(
            "system_changed",
            "system",
            "System prompt changed",
            "the system prompt changed",
            "Keep the system prompt fixed for the run and put per-call instructions after the cached prefix.",
        ),
        Cause(
            "key_order",
            None,  # the area of the item whose JSON was re-serialised: tools, system or history
            "JSON key order",
            "the same JSON was serialised with another key order",
            "Serialise JSON with a fixed key order (e.g. sort_keys=True): the same content rendered "
            "different bytes and broke the prefix.",
        ),
        Cause(
            "history_rewritten",
            "history",
            "History rewritten",
            "earlier history was edited, removed or compacted",
            "Append to the history instead of editing or dropping earlier messages; when you must trim, "
            "trim rarely and in large steps.",
        ),
        Cause(
            "context_edited",
            "history",
            "Context compacted or edited",
            "the context was compacted or edited before the model saw it (a compaction, or the provider's "
            "context editing clearing old tool results or thinking), so the cache was written again from "
            "the first changed item",
            "Expected after a compaction or a context edit: make each one count (compact rarely and in large "
            "steps; with Anthropic's context editing, set clear_at_least so an edit clears enough to pay for "
            "the cache it invalidates).",
        ),
        Cause(
            "model_changed",
            "model",
            "Model changed",
            "the model changed (each model has its own cache)",
            "Keep one model per conversation, or run the other model as a sub-agent with its own prefix.",
        ),
        Cause(
            "ttl_expired",
            None,
            "Cache lifetime expired",
            "the gap since the cached call was longer than the cache lifetime",
            "Use the 1-hour cache (or a cheap keep-alive call) when calls are more than 5 minutes apart.",
        ),
        Cause(
            "below_minimum",
            None,
            "Prefix below the minimum",
            "the cacheable prefix is below the model's minimum, so it is never cached",
            "Put enough stable content before the cache breakpoint, or drop the breakpoint: a prefix below "
            "the model's minimum is never cached.",
        ),
        Cause(
            "invisible",
            None,
            "Invisible invalidator",
            "the prefix was identical, yet the provider read far less than expected",
            "Look at what the trace does not show (images, tool_choice, request options, region): the "
            "prefix was identical, yet the provider read far less from its cache.",
        ),
    )
}

FINDING_TYPES: dict[str, FindingType] = {
    entry.name: entry
    for entry in (
        FindingType(
            "cache_invalidated",
            "warning",
            "Cache invalidated",
            "A call could not reuse the prompt cache its run had built: the first item that differs from "
            "the cached prefix (the invalidator) forced everything after it to be written again.",
            None,
        ),
        FindingType(
            "invisible_invalidator",
            "warning",
            "Invisible invalidator",
            "The prefix was identical to a cached call's, yet the provider read far less from its cache: "
            "something the trace does not show broke it.",
            None,
        ),
        FindingType(
            "conflicting_versions",
            "warning",
            "Conflicting versions",
            "Two versions of the same source sat in one window: the model saw both and had to guess which "
            "one is current.",
            "Include one version per source and exclude the other as superseded.",
        ),
        FindingType(
            "superseded_included",
            "warning",
            "Superseded item included",
            "An item and the item that supersedes it were both in the window.",
            "Exclude an item once another included item supersedes it.",
        ),
        FindingType(
            "stale_version",
            "warning",
            "Stale version",
            "An item older than a version the run had already used came back into the window.",
            "Refresh this item from its source: the run already used a newer version.",
        ),
        FindingType(
            "pinned_dropped",
            "error",
            "Pinned item dropped",
            "A pinned item that was in the previous call is gone, although pinned items must stay in the "
            "window.",
            "Make the context builder keep pinned items, or unpin the item on purpose.",
        ),
        FindingType(
            "fact_dropped",
            "warning",
            "Fact dropped",
            "A fact or standing rule that was in the previous call left the window: the model no longer "
            "knows it.",
            "Keep standing facts and rules in a pinned block or a note file, not in history that gets "
            "trimmed.",
        ),
        FindingType(
            "lost_in_middle",
            "warning",
            "Lost in the middle",
            "A pinned item sits in the middle 20–80 % of a long window, where models attend to it least.",
            "Move pinned constraints to the start or the end of the window, where models read most reliably.",
        ),
        FindingType(
            "output_reserve_squeezed",
            "warning",
            "Output reserve squeezed",
            "The prompt takes part of the room reserved for the model's answer: the answer may be cut short.",
            "Trim the prompt: it now takes the room reserved for the model's answer.",
        ),
        FindingType(
            "budget_exceeded",
            "error",
            "Budget exceeded",
            "The prompt is larger than the model's context limit.",
            "Bring the window under the model's limit: elide old tool results or compact older turns.",
        ),
        FindingType(
            "unused_tools",
            "warning",
            "Unused tools",
            "Tools offered on every call but never called in the run: their definitions are paid for on "
            "each call.",
            "Remove the tools this agent never calls, or load them on demand: each is paid on every call.",
        ),
        FindingType(
            "unknown_tool_called",
            "warning",
            "Unknown tool called",
            "The model asked for a tool that was not in its catalogue.",
            "Give the model the tool it asked for, or fix the name the prompt teaches it.",
        ),
        FindingType(
            "duplicate_content",
            "info",
            "Duplicate content",
            "The same content is in the window more than once.",
            "Include each piece of content once.",
        ),
        FindingType(
            "untrusted_in_instructions",
            "warning",
            "Untrusted content in instructions",
            "Tool output or external content sits among the system instructions, where it carries their "
            "authority (a prompt-injection risk).",
            "Keep tool output and external content out of the system prompt; pass it as data in a message.",
        ),
        FindingType(
            "tool_results_dominant",
            "info",
            "Tool results dominate",
            "Tool results fill more than half of the window.",
            "Elide or summarise old tool results: they fill most of the window.",
        ),
        FindingType(
            "quadratic_history",
            "warning",
            "Quadratic history",
            "The run was billed for its final window many times over: the whole history is re-sent on "
            "every call.",
            "Cache the stable prefix and trim history: the run paid for its final window many times over.",
        ),
    )
}


def finding_type(name: str) -> FindingType:
    """The catalogue entry of a finding type; a KeyError names the missing type."""
    return FINDING_TYPES[name]


def cause(name: str) -> Cause:
    """The catalogue entry of a cache-break cause; a KeyError names the missing cause."""
    return CAUSES[name]


def fix(finding_name: str, cause_name: str | None) -> str:
    """The one sentence saying what to change: the cause's fix when the finding carries one."""
    if cause_name is not None:
        return CAUSES[cause_name].fix
    return FINDING_TYPES[finding_name].fix or ""


def finding_help(name: str) -> str:
    """The explanation of a finding type; a type this version does not know gets a neutral sentence."""
    entry = FINDING_TYPES.get(name)
    return entry.help if entry else "A finding of a type this version of ctxview does not describe."


def cause_help(name: str | None) -> str:
    """Why a cache break happened, in a few words; empty for no cause or one this version does not know."""
    entry = CAUSES.get(name or "")
    return entry.help if entry else ""
