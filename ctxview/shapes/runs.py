"""The runs list's query string: filters, sort and page, validated once (a bad one is a 400 that says why)."""

from collections.abc import Collection, Mapping
from datetime import UTC, datetime, time, timedelta

from ctxview.params import BadParameter, int_param

PAGE_SIZE = 25
# Sort keys the list offers, and the column each sorts by (the query code maps them to SQL).
SORTS = ("started", "calls", "turns", "peak", "hit_rate", "billed", "cost", "findings")


def _when(query: Mapping[str, str], name: str, next_day: bool) -> datetime | None:
    """A date or a date and time; a date alone is the start of that day, or of the next with
    ``next_day``: ``until`` excludes its instant (as the API's), so ``until=2026-11-30`` takes that day."""
    value = (query.get(name) or "").strip()
    if not value:
        return None
    try:
        if len(value) == 10:
            day = datetime.fromisoformat(value).date()
            parsed = datetime.combine(day + timedelta(days=1) if next_day else day, time.min)
        else:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise BadParameter(
            f"{name} must be a date (2026-11-30) or a date and time (2026-11-30T09:00), not {value[:40]!r}"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# What a run's window held: query parameter -> item field (as ctxview.search.ITEM_FILTERS, which needs
# Django; this module does not).
ITEM_FIELDS = {"item": "id", "source": "source", "version": "version", "hash": "hash"}
ITEM_VALUE_LIMIT = 500


def parse(
    query: Mapping[str, str],
    services: Collection[str],
    models: Collection[str],
    finding_types: Collection[str],
    labels: Collection[str] = (),
) -> dict:
    """The list's filters from the query string; values must be ones the project has (or empty)."""
    service = (query.get("service") or "").strip()
    if service and service not in services:
        raise BadParameter(f"no run of this project comes from a service called {service[:80]!r}")
    model = (query.get("model") or "").strip()
    if model and model not in models:
        raise BadParameter(f"no run of this project used a model called {model[:80]!r}")
    finding = (query.get("finding") or "").strip()
    if finding and finding not in finding_types:
        raise BadParameter(f"finding must be one of the finding types ({', '.join(sorted(finding_types))})")
    label = label_filter(query.get("label") or "")
    if label and label not in labels:
        raise BadParameter(f"no run of this project is labelled {label[:80]!r}")
    held = {}
    for name, field in ITEM_FIELDS.items():
        value = (query.get(name) or "").strip()
        if len(value) > ITEM_VALUE_LIMIT:
            raise BadParameter(f"{name} is longer than {ITEM_VALUE_LIMIT} characters")
        if value:
            held[field] = value
    since, until = _when(query, "since", False), _when(query, "until", True)
    if since and until and since >= until:  # until excludes its instant: an empty range
        raise BadParameter("since must come before until")
    sort = (query.get("sort") or "-started").strip()
    if sort.lstrip("-") not in SORTS:
        raise BadParameter(f"sort must be one of {', '.join(SORTS)} (prefix - for descending)")
    return {
        "service": service,
        "model": model,
        "finding": finding,
        "label": label,
        "held": held,
        "since": since,
        "until": until,
        "sort": sort,
        "page": int_param(query, "page", 1, 1, 10**6),
    }


def label_filter(value: str) -> str:
    """The label a filter asks for, as labels are stored (lower-cased, trimmed): the page's and the API's."""
    return value.strip().lower()


def sort_links(current: str) -> dict[str, str]:
    """Per column, the sort its header link asks for: the same column flips its direction."""
    return {key: key if current == f"-{key}" else f"-{key}" for key in SORTS}


def costliest_breaks(accounting: Mapping | None) -> dict | None:
    """The cause of cache breaks that cost the run most (by tokens written again where no price is
    known), from ``Run.accounting``: its count, tokens written again and cost (None when unknown)."""
    accounting = accounting or {}
    causes = (accounting.get("cache_breaks") or {}).get("by_cause") or {}
    if not causes:
        return None
    # The accounting sums an unpriced break as $0: without a price the cost is unknown, not zero.
    priced = (accounting.get("cost_usd") or {}).get("with_cache") is not None
    cause, entry = min(
        causes.items(),
        key=lambda pair: (-(pair[1]["cost_usd"] if priced else 0), -pair[1]["tokens_rewritten"], pair[0]),
    )
    return {
        "cause": cause,
        "count": entry["count"],
        "tokens_rewritten": entry["tokens_rewritten"],
        "cost_usd": entry["cost_usd"] if priced else None,
    }


def figures(accounting: Mapping | None) -> dict:
    """The list's accounting columns from ``Run.accounting`` (None until the run is analysed)."""
    accounting = accounting or {}
    cost = (accounting.get("cost_usd") or {}).get("with_cache")
    return {"hit_rate": accounting.get("cache_hit_rate"), "cost": cost}
