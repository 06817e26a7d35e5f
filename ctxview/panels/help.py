"""The short explanations the UI shows beside each finding type, cache-break cause, reason and chart.

Plain strings, no Django: the templates show them, the tests check every finding type has one.
"""

# What each finding type means, in one or two sentences (the fix comes with the finding itself).
FINDINGS = {
    "cache_invalidated": "A call could not reuse the prompt cache its run had built: the first item that "
    "differs from the cached prefix (the invalidator) forced everything after it to be written again.",
    "invisible_invalidator": "The prefix was identical to a cached call's, yet the provider read far less "
    "from its cache: something the trace does not show broke it.",
    "conflicting_versions": "Two versions of the same source sat in one window: the model saw both and "
    "had to guess which one is current.",
    "superseded_included": "An item and the item that supersedes it were both in the window.",
    "stale_version": "An item older than a version the run had already used came back into the window.",
    "pinned_dropped": "A pinned item that was in the previous call is gone, although pinned items must "
    "stay in the window.",
    "fact_dropped": "A fact or standing rule that was in the previous call left the window: the model no "
    "longer knows it.",
    "lost_in_middle": "A pinned item sits in the middle 20–80 % of a long window, where models attend to "
    "it least.",
    "output_reserve_squeezed": "The prompt takes part of the room reserved for the model's answer: the "
    "answer may be cut short.",
    "budget_exceeded": "The prompt is larger than the model's context limit.",
    "unused_tools": "Tools offered on every call but never called in the run: their definitions are paid "
    "for on each call.",
    "unknown_tool_called": "The model asked for a tool that was not in its catalogue.",
    "duplicate_content": "The same content is in the window more than once.",
    "untrusted_in_instructions": "Tool output or external content sits among the system instructions, "
    "where it carries their authority (a prompt-injection risk).",
    "tool_results_dominant": "Tool results fill more than half of the window.",
    "quadratic_history": "The run was billed for its final window many times over: the whole history is "
    "re-sent on every call.",
}

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}

# Why a call broke the prompt cache (ctxview.analysis.cache), in a few words.
CAUSES = {
    "tools_changed": "the tool catalogue changed (a tool added, removed, reordered or its schema edited)",
    "volatile_system_prompt": "the system prompt carries a changing value (a date, time, id or counter)",
    "system_changed": "the system prompt changed",
    "key_order": "the same JSON was serialised with another key order",
    "history_rewritten": "earlier history was edited, removed or compacted",
    "model_changed": "the model changed (each model has its own cache)",
    "ttl_expired": "the gap since the cached call was longer than the cache lifetime",
    "below_minimum": "the cacheable prefix is below the model's minimum, so it is never cached",
    "invisible": "the prefix was identical, yet the provider read far less than expected",
}

# What the context builder's exclusion reasons mean (the sender may use its own words too).
REASONS = {
    "superseded": "a newer version replaced it",
    "stage_complete": "the stage it served is finished",
    "budget": "it did not fit the token budget",
    "sliding_window": "it fell out of the sliding window of recent turns",
    "compacted": "a summary replaced it",
    "duplicate": "the same content is already in the window",
    "irrelevant": "the builder judged it irrelevant",
    "untrusted": "its source is not trusted",
    "expired": "it is out of date",
}

# One paragraph beside each chart and panel.
CHARTS = {
    "composition": "What the window was spent on, turn by turn (the last call of each turn, or every call): "
    "one band per bucket, reconciled to the billed prompt when the provider reported it (the rest is "
    "scaffolding: role markers, tool-calling preamble). The dashed lines are the model's limit and the "
    "room reserved for the answer. Click a turn to explain it.",
    "cache": "Per call, the prompt split into uncached input, cache writes and cache reads, with the hit "
    "rate (cache read ÷ prompt) on the right axis and the read the analysis expected from the prefixes. "
    "Each red marker is a cache break: click it to open the call, its invalidator and the diff.",
    "findings": "Every finding at the call where it starts (a condition that lasts is reported once). "
    "Above them, the notes and bookmarks left on the run's calls on the review page. "
    "Click a marker to open the call.",
    "presence": "Items (rows, grouped by bucket) across calls (columns): coloured by how each call "
    "included the item, red where the call excluded it (hover for the reason), blank where it was "
    "absent. Long runs are binned: a column then covers several calls and shows the last call's state. "
    "Click a row to see that item's whole life.",
    "calls": "The calls of the run in order, with their usage and cache outcome.",
}

MODES = {
    "verbatim": "the full content",
    "excerpt": "part of the content",
    "summary": "a summary of the content",
    "reference": "a pointer to the content (a path or id), not the content",
}


def finding_help(finding_type: str) -> str:
    """The explanation of a finding type; a type this version does not know gets a neutral sentence."""
    return FINDINGS.get(finding_type, "A finding of a type this version of ctxview does not describe.")


def cause_help(cause: str | None) -> str:
    """Why a cache break happened, in a few words; an empty string for no cause or one this version does
    not know."""
    return CAUSES.get(cause or "", "")


def reason_help(reason: str | None) -> str:
    """The meaning of an exclusion reason, or an empty string for the sender's own words."""
    return REASONS.get(reason or "", "")
