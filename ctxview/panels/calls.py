"""The run's calls, a page at a time, with usage and the cache outcome of each."""

from collections.abc import Mapping
from typing import Any

from ctxview.panels import BadParameter, help, int_param

PAGE = 50


def page_of(rows: list[dict], page: int, size: int = PAGE) -> dict:
    """One page of the call rows, with the page numbers around it."""
    pages = max(1, -(-len(rows) // size))
    if page > pages:
        raise BadParameter(f"page {page} does not exist: this run has {pages} page(s) of calls")
    chunk = rows[(page - 1) * size : page * size]
    for row in chunk:
        cache = row.get("cache") or {}
        row["broke"] = bool(cache.get("broke"))
        row["cause"] = cache.get("cause")
        row["cause_help"] = help.CAUSES.get(cache.get("cause") or "", "")
        row["analysed"] = row.get("cache") is not None
        prompt, read = row["prompt_total"], row["cache_read"]
        row["hit_rate"] = read / prompt if prompt and read is not None else None
    return {
        "rows": chunk,
        "page": page,
        "pages": pages,
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < pages else None,
        "total": len(rows),
    }


class CallsPanel:
    """Every call of the run, paginated."""

    slug = "calls"
    title = "Calls"
    template = "panels/calls.html"
    help = help.CHARTS["calls"]

    def params(self, query: Mapping[str, str]) -> dict:
        return {"page": int_param(query, "page", 1, 1, 10**6)}

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview.panels import load

        return {"rows": load.series(run)}

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        return page_of(data["rows"], params["page"])

    def summary(self, result: Mapping[str, Any]) -> str:
        return f"{result['total']} calls"
