"""Run pages: the overview and its panels, live updates, Explain this turn, Compare, and Item."""

from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.gzip import gzip_page
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from ctxcore import analysis, catalogue
from ctxcore.vocabulary import EXCLUSION_REASONS
from ctxview import queries
from ctxview.access import get_run_for_user
from ctxview.panels import run_panels
from ctxview.params import BadParameter, int_param
from ctxview.replay import turn_probes
from ctxview.shapes import compare, diff, explain, item, overview
from ctxview.views_common import notes_region, region, render_page, ui_view
from ingest.models import Run

POLL_SECONDS = 3
# ?panels=server: the overview with its panels' bodies rendered in the page (for a browser without JS).
SERVER_PANELS = "server"


def _status(run: Run) -> str:
    return overview.status(run.call_count, run.analysed_seq, run.updated_at, timezone.now())


def _run_context(run: Run, state: str) -> dict:
    peak = run.calls.aggregate(peak=Max("prompt_total"))["peak"]
    last = run.calls.filter(seq__isnull=False).order_by("-seq").values_list("budget", flat=True).first()
    limit = (last or {}).get("limit")
    severities = dict(
        run.findings.values_list("severity").annotate(n=Count("id")).values_list("severity", "n")
    )
    findings = {name: severities.get(name, 0) for name in ("error", "warning", "info")}
    fields = {
        "call_count": run.call_count,
        "turn_count": run.turn_count,
        "prompt_total": run.prompt_total,
        "accounting": run.accounting,
    }
    return {
        "run": run,
        "project": run.project,
        "title": run.label[:80],
        "kpis": overview.kpis(fields, peak, limit, findings),
        "status": state,
        "poll_seconds": POLL_SECONDS,
        "panels": list(run_panels().values()),
        "derived": run.calls.exclude(manifest_source="explicit").exists(),
    }


@ui_view
def run(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    context = {**_run_context(run, _status(run)), "review": queries.review_summary(run)}
    server = request.GET.get("panels") == SERVER_PANELS and not region(request, ("kpis", "review-marks"))
    # ?panels=server (the no-JavaScript notice's link): every panel's body in the page; charts cannot be
    # drawn without a script, but the tables (breaks by cause, findings, calls) read as they are. Not
    # the default: the page would wait for all the panels and, as it carries the CSRF token, it is sent
    # uncompressed (see run_panel).
    context["panel_bodies"] = [
        (panel, _panel_body(request, run, panel)[0] if server else None) for panel in context["panels"]
    ]
    context["server_panels"] = server
    return render_page(request, "ctxview/run.html", context, regions=("page", "kpis", "review-marks"))


@ui_view
def run_live(request: HttpRequest, run_id: int) -> HttpResponse:
    """The KPI strip while a run is still receiving calls: 204 when nothing changed, 286 once it is idle.

    The page sends the counts it shows; when they changed the strip comes back with a ``run-updated``
    event, which makes the panels reload themselves.
    """
    run = get_run_for_user(request.user, run_id)
    seen_calls = int_param(request.GET, "calls", 0, 0, 2**31)
    seen_analysed = int_param(request.GET, "analysed", 0, 0, 2**31)
    state = _status(run)
    changed = (seen_calls, seen_analysed) != (run.call_count, run.analysed_seq)
    if not changed and state != "idle":
        return HttpResponse(status=204)  # before the strip's queries: most polls end here
    content = render_to_string("ctxview/run.html#kpis", _run_context(run, state), request)
    # The last strip, without the poller; 286 tells htmx to stop polling.
    response = HttpResponseStopPolling(content) if state == "idle" else HttpResponse(content)
    if changed:
        trigger_client_event(response, "run-updated")
    return response


# Panels carry the charts' data (a long run's is a few hundred kB of JSON that compresses 20x). They are
# compressed here, not site-wide: a panel holds no secret (no CSRF token), so compressing it cannot leak
# one (BREACH), whereas the pages do carry the token.
@gzip_page
@ui_view
def run_panel(request: HttpRequest, run_id: int, slug: str) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    panel = run_panels().get(slug)
    if panel is None:
        raise Http404("no such panel")
    body, summary = _panel_body(request, run, panel)
    # The summary fills the badge beside the panel's title (an out-of-band swap: the title is outside
    # the body that htmx swaps).
    badge = render_to_string("panels/_summary.html", {"panel": panel, "summary": summary})
    return HttpResponse(body + badge)


def _panel_body(request: HttpRequest, run: Run, panel) -> tuple[str, str]:
    """A panel's body (its template on its result, for the run page's query) and its summary."""
    params = panel.params(request.GET)
    result = panel.compute(panel.load(run, params), params)
    context = {"run": run, "panel": panel, "result": result, "params": params}
    return render_to_string(panel.template, context, request), panel.summary(result)


@ui_view
def explain_turn(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    if not run.turn_count:
        raise BadParameter("this run has no numbered turns yet")
    turn = int_param(request.GET, "turn", run.turn_count, 1, run.turn_count)
    current = queries.last_call_of_turn(run, turn)
    if current is None:
        raise BadParameter(f"turn {turn} has no calls in this run")
    previous = run.calls.filter(seq__isnull=False, turn__lt=turn).order_by("-seq").first()
    first = run.calls.filter(seq__isnull=False).order_by("seq").first()
    turn_rows = queries.series(run, turn=turn)
    findings = queries.findings(run, call_seq__in=[row["seq"] for row in turn_rows])
    result = explain.explain(
        queries.call_dict(current),
        queries.call_dict(previous) if previous else None,
        queries.call_dict(first),
        explain.history(queries.manifests(run, up_to_seq=current.seq)),
        turn_rows,
        findings,
        queries.item_url(run.id, ""),
    )
    context = {
        "run": run,
        "project": run.project,
        "title": f"Turn {turn} · {run.label[:80]}",
        "turn": turn,
        "current": current,
        "previous": previous,
        "first": first,
        "result": result,
        "previous_turn": turn - 1 if turn > 1 else None,
        "next_turn": turn + 1 if turn < run.turn_count else None,
        "reasons": EXCLUSION_REASONS,
        "probes": turn_probes(run, turn),
    }
    return render_page(request, "ctxview/explain.html", context)


def _call_pair(request: HttpRequest, run: Run) -> tuple[int, int]:
    if not run.call_count:
        raise BadParameter("this run has no calls yet")
    b = int_param(request.GET, "b", run.call_count, 1, run.call_count)
    a = int_param(request.GET, "a", max(1, b - 1), 1, run.call_count)
    return a, b


@ui_view
def compare_calls(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    a, b = _call_pair(request, run)
    calls = queries.calls_by_seq(run, {a, b})
    if a not in calls or b not in calls:
        raise BadParameter("both calls must be numbered calls of this run")
    result = compare.compare(calls[a], calls[b], queries.item_url(run.id, ""))
    context = {
        "run": run,
        "project": run.project,
        "title": f"Compare calls {a} and {b} · {run.label[:80]}",
        "a": calls[a],
        "b": calls[b],
        "result": result,
        "call_count": run.call_count,
    }
    return render_page(request, "ctxview/compare.html", context, regions=("page", "comparison"))


@ui_view
def compare_item(request: HttpRequest, run_id: int) -> HttpResponse:
    """The diff of one item between the two compared calls (loaded on demand)."""
    run = get_run_for_user(request.user, run_id)
    a, b = _call_pair(request, run)
    item_id = request.GET.get("item") or ""
    calls = queries.calls_by_seq(run, {a, b})
    before = next((i for i in calls.get(a, {}).get("items", []) if i["id"] == item_id), None)
    after = next((i for i in calls.get(b, {}).get("items", []) if i["id"] == item_id), None)
    if before is None or after is None:
        raise BadParameter("item must be the id of an item in both calls")
    texts = queries.contents(run.project_id, [before["hash"], after["hash"]])
    context = {
        "before": before,
        "after": after,
        "diff": diff.segments(texts[before["hash"]], texts[after["hash"]])
        if before["hash"] in texts and after["hash"] in texts
        else None,
        "missing_content": before["hash"] not in texts or after["hash"] not in texts,
        "label_before": f"call {a}",
        "label_after": f"call {b}",
    }
    return render(request, "ctxview/diff.html", context)


@ui_view
def item_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    item_id = request.GET.get("id") or ""
    if not item_id:
        raise BadParameter("id (the item's id) is required, e.g. ?id=fact:affected-shard")
    if len(item_id) > 500:
        raise BadParameter("id must be at most 500 characters")
    # Stored items (defaults left out) are what item_lifecycle reads; expanding 100,000 of them for a
    # long run would only cost time.
    edits = queries.context_edits(run)
    calls = [
        (seq, items, excluded, source, edits.get(seq, ()))
        for seq, _turn, items, excluded, source in queries.manifests(run)
    ]
    lifecycle = analysis.item_lifecycle(item_id, calls)
    if lifecycle["first_seq"] is None and not lifecycle["excluded"]:
        raise Http404("no such item in this run")
    ids = {seq: (call_id, turn) for call_id, seq, turn in run.calls.values_list("id", "seq", "turn")}
    turns = {seq: turn for seq, (_, turn) in ids.items()}
    urls = {seq: queries.call_url(call_id) for seq, (call_id, _) in ids.items()}
    result = item.story(lifecycle, turns, urls)
    hashes = []
    for _seq, items, _excluded, _source, _edits in calls:
        for entry in items:
            if entry["id"] == item_id and entry["hash"] not in hashes:
                hashes.append(entry["hash"])
    texts = queries.contents(run.project_id, hashes[:20])
    versions = [{"hash": value, "text": texts.get(value)} for value in hashes[:20]]
    findings = queries.findings(run, item_id=item_id)
    context = {
        "run": run,
        "project": run.project,
        "title": f"Item {item_id} · {run.label[:80]}",
        "item_id": item_id,
        "result": result,
        "figure": item.figure(result),
        "contents": versions,
        "more_versions": len(hashes) > 20,
        "findings": [{**f, "help": catalogue.finding_help(f["type"])} for f in findings],
        **notes_region(request.user, run, item_id=item_id),
    }
    return render_page(request, "ctxview/item.html", context)
