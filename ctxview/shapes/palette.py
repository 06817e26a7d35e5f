"""Colours shared by the charts (plotly figures) and the CSS (static/ctxview/app.css uses the same values)."""

BUCKET_ORDER = (
    "system",
    "tools",
    "memory",
    "summary",
    "retrieved",
    "conversation",
    "tool_results",
    "other",
    "scaffolding",
)

BUCKETS = {
    "system": "#4c5a9c",
    "tools": "#8a6bbe",
    "memory": "#c0842b",
    "summary": "#b5a33a",
    "retrieved": "#3f9a8c",
    "conversation": "#4f8fd6",
    "tool_results": "#7fb069",
    "other": "#9aa3b2",
    "scaffolding": "#d5d9e0",
}

MODES = {
    "verbatim": "#2f5bd3",
    "excerpt": "#3f9a8c",
    "summary": "#b5a33a",
    "reference": "#8a6bbe",
}
EXCLUDED = "#d0433a"
ABSENT = "#f1f3f6"
# Where a probe is in a window (presence map): not the items' modes, so probe rows read apart.
PROBE_HOW = {
    "verbatim": "#127a3c",
    "summary": "#e0a03a",
    "stub": "#7d5a3c",
    "absent": "#f3c1bd",
    "unknown": "#c9ced8",
}

CACHE = {"uncached": "#9aa3b2", "cache_write": "#e0a03a", "cache_read": "#3f9a8c"}
BREAK = "#d0433a"
SEVERITY = {"error": "#b42318", "warning": "#d08a1a", "info": "#4f8fd6"}
# Review marks on the findings timeline (and the calls table's indicators).
NOTE = "#8a6bbe"
BOOKMARK = "#127a3c"
BUDGET = "#1d2330"
RESERVED = "rgba(180, 35, 24, 0.12)"
