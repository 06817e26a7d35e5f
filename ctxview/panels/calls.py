"""The run's calls, a page at a time, with usage and the cache outcome of each."""

from collections.abc import Mapping
from typing import Any

from ctxcore import catalogue
from ctxview.panels.base import Panel
from ctxview.params import check_page, int_param, page_count
from ctxview.shapes import words

PAGE = 50


def page_of(
    chunk: list[dict], total: int, page: int, size: int = PAGE, marks: Mapping[int, Mapping] | None = None
) -> dict:
    """One page of call rows (``chunk``, already cut to the page) out of ``total``, with its neighbours;
    ``marks`` (notes count and bookmark by seq) flags the calls people left a note on or bookmarked."""
    pages = page_count(total, size)
    check_page(page, pages, "page", "the calls of this run")
    marks = marks or {}
    for row in chunk:
        mark = marks.get(row["seq"]) or {}
        row["notes"] = mark.get("notes", 0)
        row["bookmarked"] = bool(mark.get("bookmarked"))
        cache = row.get("cache") or {}
        row["broke"] = bool(cache.get("broke"))
        row["cause"] = cache.get("cause")
        row["cause_help"] = catalogue.cause_help(cache.get("cause"))
        row["analysed"] = row.get("cache") is not None
        prompt, read = row["prompt_total"], row["cache_read"]
        row["hit_rate"] = read / prompt if prompt and read is not None else None
    return {
        "rows": chunk,
        "page": page,
        "pages": pages,
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < pages else None,
        "total": total,
    }


class CallsPanel(Panel):
    """Every call of the run, paginated."""

    slug = "calls"
    title = "Calls"

    def params(self, query: Mapping[str, str]) -> dict:
        return {"page": int_param(query, "page", 1, 1, 10**6)}

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries

        # Calls are numbered 1..call_count: a page is a range of seq, read on its own.
        first = (params["page"] - 1) * PAGE + 1
        seqs = (first, first + PAGE - 1)
        return {
            "rows": queries.series(run, seqs=seqs),
            "total": run.call_count,
            "marks": queries.call_marks(run, seqs),
        }

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        return page_of(data["rows"], data["total"], params["page"], marks=data.get("marks"))

    def summary(self, result: Mapping[str, Any]) -> str:
        return words.counted(result["total"], "call")
