"""The call page: budget, buckets, items in render order, exclusions, prefix chain, cache break, findings."""

from collections import Counter

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ctxcore import catalogue
from ctxcore.analysis import limits, textdiff
from ctxcore.analysis.cache import KEY_ORDER
from ctxcore.replay import BadPolicy, parse
from ctxcore.vocabulary import expand
from ctxview import queries, replay
from ctxview.access import get_call_for_user
from ctxview.panels.cache import by_cause
from ctxview.params import BadParameter, int_param
from ctxview.shapes import call as shapes
from ctxview.shapes import diff, help
from ctxview.views_common import notes_region, render_page, ui_view
from ingest.models import Call, Content

# Rows of the items table shown before "show all" (a call may carry 5,000 items).
ITEMS_SHOWN = 300
PREVIEW_CHARS = 160
CONTENT_SHOWN = 65_536


def _detail_template(cause: str | None) -> str | None:
    """The cause's own template of details (``templates/causes/``); None for no or an unknown cause."""
    entry = catalogue.CAUSES.get(cause) if cause else None
    return entry.detail_template if entry else None


def _invalidation(call: Call, items: list[dict], cache: dict) -> dict | None:
    """The invalidating item against the same position of the call whose cache was broken, with a diff.

    ``items`` are the call's own, expanded (``call.full_items()``)."""
    if not cache.get("broke"):
        return None
    detail = cache.get("detail") or {}
    result = {
        "cause": cache.get("cause"),
        "cause_help": catalogue.cause_help(cache.get("cause")),
        "detail_template": _detail_template(cache.get("cause")),
        "detail": detail,
        "reference_seq": cache.get("reference_seq"),
        "reference": None,
        "old": None,
        "new": None,
        "diff": None,
        "story": None,
    }
    reference = (
        call.run.calls.filter(seq=cache["reference_seq"]).only("id", "run", "seq", "item_list").first()
        if cache.get("reference_seq")
        else None
    )
    position = detail.get("position")
    if reference is None or position is None:
        return result
    result["reference"] = {"id": reference.id, "seq": reference.seq, "url": queries.call_url(reference.id)}
    old_items = expand(reference.items)
    old = old_items[position] if position < len(old_items) else None
    new = items[position] if position < len(items) else None
    result["old"], result["new"] = old, new
    if not shapes.diffable(result["cause"], old, new):
        # Items removed, inserted or cut off: two unrelated items' bytes would say nothing, words do.
        reasons = {entry["id"]: entry.get("reason") for entry in call.excluded}
        result["story"] = shapes.rewrite_story(old_items, items, position, reasons)
        return result
    texts = queries.contents(call.project_id, [entry["hash"] for entry in (old, new) if entry])
    if old and new and old["hash"] in texts and new["hash"] in texts:
        result["diff"] = diff.segments(texts[old["hash"]], texts[new["hash"]])
        if result["cause"] == KEY_ORDER:  # the same JSON: which keys moved says it, a byte diff does not
            result["moved_keys"] = textdiff.moved_keys(texts[old["hash"]], texts[new["hash"]])
    result["missing_content"] = result["diff"] is None
    return result


def _cause_total(call: Call, cache: dict) -> dict | None:
    """Every break of the run with this call's cause, summed (count, tokens, cost, first and last call)."""
    if not cache.get("broke") or not cache.get("cause"):
        return None
    breaks = queries.cache_breaks([call.run_id], cause=cache["cause"]).get(call.run_id)
    return by_cause(breaks)[0] if breaks else None


def _previews(call: Call, hashes: list[str]) -> dict[str, str]:
    return dict(Content.objects.by_hash(call.project_id, hashes, "text", chars=PREVIEW_CHARS))


@ui_view
def call(request: HttpRequest, call_id: int) -> HttpResponse:
    call = get_call_for_user(request.user, call_id)
    run = call.run
    show_all = request.GET.get("all") == "1"
    analysis = call.analysis or {}
    cache = analysis.get("cache") or {}
    findings = [
        {**finding.to_dict(), "help": catalogue.finding_help(finding.type)}
        for finding in run.findings.filter(call_seq=call.seq).order_by("id")
    ]
    items = call.full_items()
    table = shapes.item_rows(items, cache, findings)
    shown = table["rows"] if show_all else table["rows"][:ITEMS_SHOWN]
    previews = _previews(call, [row["hash"] for row in shown])
    for row in shown:
        row["preview"] = previews.get(row["hash"])
    around = list(run.calls.filter(seq__isnull=False).values_list("seq", "turn", "id"))
    neighbours = shapes.neighbours(around, call.seq) if call.seq is not None else {}
    excluded = [{**entry, "reason_help": help.reason_help(entry.get("reason"))} for entry in call.excluded]
    # A column only where some entry has a value: builders rarely count what they left out.
    excluded_columns = {
        name for name in ("tokens", "source", "version") if any(e.get(name) for e in excluded)
    }
    reasons = Counter(entry.get("reason") or "" for entry in call.excluded)
    context = {
        "call": call,
        "run": run,
        "project": run.project,
        "title": f"Call {call.seq} · {run.label[:80]}",
        "analysis": analysis,
        "cache": cache,
        # The provider's estimate of what its cache could not reuse, shown beside our tokens rewritten.
        "provider_missed_tokens": limits.missed_tokens(call.usage_raw),
        "gauge": shapes.gauge(analysis.get("buckets"), call.budget),
        "table": table,
        "rows": shown,
        "hidden_rows": len(table["rows"]) - len(shown),
        "strip": shapes.prefix_strip(table["rows"], cache),
        "invalidation": _invalidation(call, items, cache),
        # A cause that is not a break (below the minimum) still says why nothing was cached.
        "cache_detail_template": _detail_template(cache.get("cause")) if not cache.get("broke") else None,
        "cause_total": _cause_total(call, cache),
        "excluded": excluded,
        "excluded_columns": excluded_columns,
        "excluded_reasons": reasons.most_common(),
        "conflicts": [
            {**conflict, "help": catalogue.finding_help(conflict["type"])}
            for conflict in analysis.get("conflicts") or []
        ],
        "findings": findings,
        "neighbours": neighbours,
        "call_count": run.call_count,
        # Executions of the tools it asked for, one however many spans tell of each.
        "tool_executions": queries.tool_executions(run, seq=call.seq) if call.seq is not None else [],
        **notes_region(request.user, run, call=call),
    }
    context["replayed"] = _replayed(request, call)
    return render_page(request, "ctxview/call.html", context, regions=("page", "items"))


def _replayed(request: HttpRequest, call: Call) -> dict | None:
    """``?policy=<spec>``: the window that policy would have given this call (a replay, labelled so)."""
    spec = (request.GET.get("policy") or "").strip()
    if not spec:
        return None
    try:
        policy = parse(spec)
    except BadPolicy as exc:
        raise BadParameter(f"policy: {exc}") from None
    if call.seq is None:
        raise BadParameter("this call has no place in the run yet, so no policy can be replayed to it")
    replayed = replay.policy_window(call.run, policy, call.seq)
    replayed["left_out_shown"] = replayed["left_out"][:ITEMS_SHOWN]
    return replayed


@ui_view
def call_content(request: HttpRequest, call_id: int) -> HttpResponse:
    """One item's content (escaped, bounded), for the panel beside the items table."""
    call = get_call_for_user(request.user, call_id)
    items = call.full_items()
    if not items:
        raise BadParameter("this call has no items")
    position = int_param(request.GET, "pos", None, 0, len(items) - 1)
    if position is None:
        raise BadParameter("pos (the item's position in the window) is required")
    item = items[position]
    text = queries.contents(call.project_id, [item["hash"]]).get(item["hash"])
    context = {
        "call": call,
        "run": call.run,
        "item": item,
        "text": text[:CONTENT_SHOWN] if text is not None else None,
        "cut": text is not None and len(text) > CONTENT_SHOWN,
        "item_url": queries.item_url(call.run_id, item["id"]),
    }
    return render(request, "ctxview/call.html#content", context)
