"""Prompt cache per call: uncached / cache write / cache read bars, hit rate, and every break marked."""

from collections.abc import Mapping, Sequence
from typing import Any

from ctxcore import catalogue
from ctxview.panels.base import Panel
from ctxview.params import check_page, int_param, page_count
from ctxview.shapes import palette, words
from ctxview.shapes.plot import axis, base_layout, config, count_axis, links, plot_text

# Above this many calls the bars are binned (sums per bin); breaks are always shown one by one.
MAX_BARS = 1500
# Where the break markers sit on the hit-rate axis: above 100 %, clear of the bars and the line.
BREAK_ROW = 1.08
# Rows of the breaks table per page (every break is reachable through the pager).
BREAKS_PER_PAGE = 50


def _sum(values: Sequence[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def cache_series(rows: Sequence[Mapping[str, Any]]) -> dict:
    """Usage split, hit rate and expected read per call (or per bin of calls), and the list of breaks."""
    size = max(1, -(-len(rows) // MAX_BARS))
    x, uncached, write, read, hit, expected, labels, urls = [], [], [], [], [], [], [], []
    for start in range(0, len(rows), size):
        chunk = rows[start : start + size]
        first, last = chunk[0]["seq"], chunk[-1]["seq"]
        x.append(last if size > 1 else first)
        labels.append(f"calls {first}–{last}" if size > 1 else f"call {first}")
        urls.append(chunk[-1]["url"])
        uncached.append(_sum([row["uncached"] for row in chunk]))
        write.append(_sum([row["cache_write"] for row in chunk]))
        read.append(_sum([row["cache_read"] for row in chunk]))
        prompt = _sum([row["prompt_total"] for row in chunk if row["cache_read"] is not None])
        hit.append(round(read[-1] / prompt, 4) if prompt and read[-1] is not None else None)
        expected.append(_sum([(row.get("cache") or {}).get("expected_read") for row in chunk]))
    breaks = []
    for row in rows:
        cache = row.get("cache") or {}
        if not cache.get("broke"):
            continue
        breaks.append(
            {
                "seq": row["seq"],
                "turn": row["turn"],
                "url": row["url"],
                "cause": cache.get("cause"),
                "cause_help": catalogue.cause_help(cache.get("cause")),
                "invalidator": cache.get("invalidator_item_id"),
                "tokens_rewritten": cache.get("tokens_rewritten") or 0,
                "cost_usd": cache.get("cost_usd"),
            }
        )
    return {
        "x": x,
        "labels": labels,
        "urls": urls,
        "bin": size,
        "uncached": uncached,
        "cache_write": write,
        "cache_read": read,
        "hit_rate": hit,
        "expected_read": expected,
        "breaks": breaks,
        "calls": len(rows),
        "analysed": sum(1 for row in rows if row.get("cache")),
        "reported": sum(1 for row in rows if row["cache_read"] is not None),
        "read_nothing": sum(1 for row in rows if row["cache_read"] == 0),
    }


def no_break_note(result: Mapping[str, Any]) -> str:
    """What a run without a cache break says of its reuse, from the calls' reported reads: a call that read
    nothing did not reuse anything, whatever the reason (a first call, a prefix the provider did not keep)."""
    reported, nothing = result["reported"], result["read_nothing"]
    if nothing == 0:
        return "No cache break: every call read from the cache."
    if nothing == reported:
        return (
            "No cache break found, but no call read anything from the cache (each reported 0 tokens read): "
            "the prefix was never cached, or each call's prompt was below what the model caches."
        )
    return (
        f"No cache break found; {words.counted(nothing, 'call')} of {reported:,} read nothing from the cache "
        "(the first call of a chain, or a prefix the provider had not kept)."
    )


def by_cause(breaks: Sequence[Mapping[str, Any]]) -> list[dict]:
    """One row per cause, the costliest first: count, tokens written again, cost, first and last call, fix."""
    groups: dict[str, dict] = {}
    for entry in breaks:
        name = entry["cause"] or "unknown"
        group = groups.setdefault(
            name,
            {
                "cause": name,
                "title": catalogue.CAUSES[name].title if name in catalogue.CAUSES else name,
                "fix": catalogue.fix("cache_invalidated", name) if name in catalogue.CAUSES else "",
                "count": 0,
                "tokens_rewritten": 0,
                "cost_usd": None,
                "first": entry,
                "last": entry,
            },
        )
        group["count"] += 1
        group["tokens_rewritten"] += entry["tokens_rewritten"]
        if entry["cost_usd"] is not None:
            group["cost_usd"] = round((group["cost_usd"] or 0) + entry["cost_usd"], 6)
        group["last"] = entry
    return sorted(groups.values(), key=lambda g: (-(g["cost_usd"] or 0), -g["tokens_rewritten"], g["cause"]))


def verdict(cost: Mapping[str, Any] | None) -> dict | None:
    """Whether caching paid off over the run: what it saved (negative: what it cost) at list prices."""
    cost = cost or {}
    with_cache, without = cost.get("with_cache"), cost.get("without_cache")
    if with_cache is None or without is None:
        return None
    saved = round(without - with_cache, 6)
    return {"with_cache": with_cache, "without_cache": without, "saved": saved, "pays": saved >= 0}


def page_of(entries: Sequence[Any], page: int, size: int = BREAKS_PER_PAGE) -> dict:
    """One page of the breaks (``page`` counts from 1); a page past the last is a ``BadParameter``."""
    pages = page_count(len(entries), size)
    check_page(page, pages, "breaks_page", "the breaks of this run")
    start = (page - 1) * size
    return {
        "rows": list(entries[start : start + size]),
        "page": page,
        "pages": pages,
        "first": start + 1,
        "last": min(start + size, len(entries)),
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < pages else None,
    }


def _stack_tops(result: Mapping[str, Any]) -> list[int]:
    return [
        (u or 0) + (w or 0) + (r or 0)
        for u, w, r in zip(result["uncached"], result["cache_write"], result["cache_read"], strict=True)
    ]


def figure(result: Mapping[str, Any]) -> dict:
    """Stacked bars per call, the hit-rate line on a second axis, and a clickable marker on each break."""
    x = result["x"]
    # A bar opens its call (figure-level links by x, one list for all three bar traces).
    label = "call %{x}" if result["bin"] == 1 else f"{result['bin']} calls up to %{{x}}"
    data: list[dict] = [
        {
            "type": "bar",
            "name": name,
            **axis(x),
            "y": result[key],
            "marker": {"color": palette.CACHE[key]},
            "hovertemplate": f"{label}<br>{name}: %{{y:,}}<extra></extra>",
        }
        for key, name in (
            ("uncached", "uncached"),
            ("cache_write", "cache write"),
            ("cache_read", "cache read"),
        )
    ]
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "expected read",
            **axis(x),
            "y": result["expected_read"],
            "line": {"color": "#1d2330", "width": 1, "dash": "dot", "shape": "hv"},
            "hovertemplate": "expected read: %{y:,}<extra></extra>",
        }
    )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "hit rate",
            **axis(x),
            "y": result["hit_rate"],
            "yaxis": "y2",
            "line": {"color": "#2f5bd3", "width": 1.5},
            "hovertemplate": "hit rate: %{y:.0%}<extra></extra>",
        }
    )
    # Breaks sit in a row above the bars (on the hit-rate axis, above 100 %), where a click finds them.
    breaks = result["breaks"]
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "cache break",
            "x": [entry["seq"] for entry in breaks],
            "y": [BREAK_ROW] * len(breaks),
            "yaxis": "y2",
            "customdata": [entry["url"] for entry in breaks],
            "hovertext": [
                plot_text(
                    f"call {entry['seq']}: {entry['cause']}"
                    + (f" at {entry['invalidator']}" if entry["invalidator"] else "")
                    + f" · {entry['tokens_rewritten']:,} tokens written again"
                    + (f" ({words.money(entry['cost_usd'])})" if entry["cost_usd"] is not None else "")
                )
                for entry in breaks
            ],
            "hovertemplate": "%{hovertext}<br>click to open the call<extra></extra>",
            "marker": {
                "symbol": "triangle-down",
                "size": 11,
                "color": palette.BREAK,
                "line": {"color": "#ffffff", "width": 1},
            },
            "cliponaxis": False,
        }
    )
    layout = base_layout()
    layout["barmode"] = "stack"
    layout["bargap"] = 0.15
    layout["hovermode"] = "closest"
    layout["xaxis"] = count_axis(x, "call")
    peak = max((value or 0) for value in _stack_tops(result)) if result["x"] else 0
    layout["yaxis"] = {
        "title": {"text": "prompt tokens"},
        "range": [0, (peak or 1) * 1.25],
        "separatethousands": True,
    }
    layout["yaxis2"] = {
        "title": {"text": "hit rate"},
        "overlaying": "y",
        "side": "right",
        "range": [0, 1.15],
        "tickvals": [0, 0.25, 0.5, 0.75, 1],
        "tickformat": ".0%",
        "showgrid": False,
    }
    return {"data": data, "layout": layout, "config": config(), "links": links(x, result["urls"])}


class CachePanel(Panel):
    """Cache per call: what was read, written and left uncached, and each break with its invalidator."""

    slug = "cache"
    title = "Prompt cache per call"

    def params(self, query: Mapping[str, str]) -> dict:
        return {"breaks_page": int_param(query, "breaks_page", 1, 1, 10**6)}

    def load(self, run, params: Mapping[str, Any]) -> dict:
        from ctxview import queries

        return {"rows": queries.series(run), "cost": (run.accounting or {}).get("cost_usd")}

    def compute(self, data: Mapping[str, Any], params: Mapping[str, Any]) -> dict:
        result = cache_series(data["rows"])
        result["figure"] = figure(result)
        result["by_cause"] = by_cause(result["breaks"])
        result["breaks_page"] = page_of(result["breaks"], params.get("breaks_page", 1))
        result["verdict"] = verdict(data.get("cost"))
        result["no_break_note"] = no_break_note(result)
        return result

    def summary(self, result: Mapping[str, Any]) -> str:
        return words.counted(len(result["breaks"]), "break")
