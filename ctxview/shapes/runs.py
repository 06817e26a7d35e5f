"""The runs list's query string: filters, sort and page, validated once (a bad one is a 400 that says why)."""

from collections.abc import Collection, Mapping

from ctxview.params import BadParameter, int_param, time_param

PAGE_SIZE = 25
# Sort keys the list offers, and the column each sorts by (the query code maps them to SQL).
SORTS = ("started", "calls", "turns", "peak", "hit_rate", "billed", "cost", "findings")


# What a run's window held: query parameter -> item field.
ITEM_FIELDS = {"item": "id", "source": "source", "version": "version", "hash": "hash"}
ITEM_VALUE_LIMIT = 500
# The runs search's terms (``ctxview.search.search_runs`` reads them; the list's sort and page aside).
SEARCH_TERMS = ("service", "model", "finding", "label", "held", "since", "until")


def search_terms(query: Mapping[str, str]) -> dict:
    """The runs search's terms of the query string as the page and the API read them alike: values
    trimmed, the label as labels are stored, ``held`` the item fields asked for (``since`` and ``until``
    are each caller's: the page takes a date alone, the API a date and time with its zone)."""
    held = {}
    for name, field in ITEM_FIELDS.items():
        raw = query.get(name) or ""
        if len(raw) > ITEM_VALUE_LIMIT:  # as sent: the API's schema states the limit so
            raise BadParameter(f"{name} is longer than {ITEM_VALUE_LIMIT} characters")
        if raw.strip():
            held[field] = raw.strip()
    return {
        "service": (query.get("service") or "").strip(),
        "model": (query.get("model") or "").strip(),
        "finding": (query.get("finding") or "").strip(),
        "label": label_filter(query.get("label") or ""),
        "held": held,
    }


def parse(
    query: Mapping[str, str],
    services: Collection[str],
    models: Collection[str],
    finding_types: Collection[str],
    labels: Collection[str] = (),
) -> dict:
    """The list's filters from the query string; values must be ones the project has (or empty): the
    page offers them as choices, so another is a mistake to name."""
    terms = search_terms(query)
    service, model, finding, label = terms["service"], terms["model"], terms["finding"], terms["label"]
    if service and service not in services:
        raise BadParameter(f"no run of this project comes from a service called {service[:80]!r}")
    if model and model not in models:
        raise BadParameter(f"no run of this project used a model called {model[:80]!r}")
    if finding and finding not in finding_types:
        raise BadParameter(f"finding must be one of the finding types ({', '.join(sorted(finding_types))})")
    if label and label not in labels:
        raise BadParameter(f"no run of this project is labelled {label[:80]!r}")
    since, until = time_param(query, "since"), time_param(query, "until", end_of_day=True)
    if since and until and since >= until:  # until excludes its instant: an empty range
        raise BadParameter("since must come before until")
    sort = (query.get("sort") or "-started").strip()
    if sort.lstrip("-") not in SORTS:
        raise BadParameter(f"sort must be one of {', '.join(SORTS)} (prefix - for descending)")
    return {
        **terms,
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
