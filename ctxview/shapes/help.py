"""The short explanations the UI shows beside each exclusion reason, mode and chart.

Plain strings, no Django. What finding types and cache-break causes mean is in ``ctxcore.catalogue``.
"""

from ctxcore.vocabulary import EXCLUSION_REASONS

# One paragraph beside each chart and panel.
CHARTS = {
    "agents": "Which agent made which calls, with their tokens, cost and largest window. Each invocation "
    "shows how it was entered (root, handoff, as a tool, by delegation, as a subagent), indented under "
    "its parent; the packet is what its first call started from: the messages handed over.",
    "composition": "What the window was spent on, turn by turn (the last call of each turn, or every call): "
    "one band per bucket, reconciled to the billed prompt when the provider reported it (the rest is "
    "scaffolding: role markers, tool-calling preamble). The dashed lines are the model's limit and the "
    "room reserved for the answer. Click a turn to explain it.",
    "cache": "Per call, the prompt split into uncached input, cache writes and cache reads, with the hit "
    "rate (cache read ÷ prompt) on the right axis and the read the analysis expected from the prefixes. "
    "Each red marker is a cache break: click it to open the call and what broke it.",
    "findings": "Every finding at the call where it starts (a condition that lasts is reported once); "
    "the small open diamonds are its later occurrences (each further cache break of the same cause). "
    "Above them, the notes and bookmarks left on the run's calls on the review page. "
    "Click a marker to open the call.",
    "presence": "Items (rows, grouped by bucket) across calls (columns): coloured by how each call "
    "included the item, red where the call excluded it (hover for the reason), blank where it was "
    "absent. Long runs are binned: a column then covers several calls and shows the last call's state. "
    "Click a row to see that item's whole life. The rows above the items are the run's probes (its facts "
    "and rules, and what people follow on the Replay page): where each call held it, verbatim, only in a "
    "summary, only as a stub, absent, or unknown (no content to search).",
    "calls": "The calls of the run in order, with their usage and cache outcome.",
}

MODES = {
    "verbatim": "the full content",
    "excerpt": "part of the content",
    "summary": "a summary of the content",
    "reference": "a pointer to the content (a path or id), not the content",
}


def reason_help(reason: str | None) -> str:
    """The meaning of an exclusion reason, or an empty string for the sender's own words."""
    return EXCLUSION_REASONS.get(reason or "", "")
