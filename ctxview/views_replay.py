"""The Replay page of a run: each context policy's billed input, cost, cache and probes, side by side;
a chart per turn; one policy's window at one call; and the probes people follow (add, remove)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from ctxcore.replay import DEFAULT_POLICIES, BadPolicy, TooMuchWork, parse, parse_list
from ctxcore.replay.reask import MAX_PHRASING, MAX_PHRASINGS, ReaskError
from ctxcore.replay.simulate import query_call
from ctxview import writes
from ctxview.access import get_run_for_user, has_role
from ctxview.params import BadParameter, int_param
from ctxview.reask import MAX_EXPECTED, endpoint_for, question_from, reask_replay
from ctxview.replay import (
    MAX_PROBES,
    TooManyReplays,
    replay_run,
    run_calls,
    run_turns,
    window_rows,
)
from ctxview.shapes.plot import base_layout, config, plot_text
from ctxview.views_common import bad_request, render_page, ui_view
from ctxview.writes import form_int
from ingest.models import Membership

PALETTE = ("#1d2330", "#2f5bd3", "#c0392b", "#1e8449", "#b9770e", "#7d3c98", "#117a65", "#7f8c8d")


def _per_turn(entry: dict, key: str, how: str) -> tuple[list[int], list]:
    """A policy's per-call figure per turn: the turn's last call ("last") or the turn's sum ("sum"); a
    turn with an unknown figure (no price for the model) is None, a gap in the line, never 0."""
    turns: dict[int, float | None] = {}
    for row in entry["per_call"]:
        value = row[key]
        if how == "sum" and row["turn"] in turns:
            before = turns[row["turn"]]
            value = None if before is None or value is None else before + value
        turns[row["turn"]] = value
    ordered = sorted(turns)
    return ordered, [None if turns[turn] is None else round(turns[turn], 6) for turn in ordered]


DASHES = ("solid", "dash", "dot", "dashdot")


def _figure(policies: list[dict], key: str, how: str, title: str) -> dict:
    """One line per policy. A line equal to an earlier one is drawn dashed over it and says so in its
    name: two policies that keep the same window would otherwise look like one."""
    data = []
    drawn: dict[tuple, str] = {}
    for index, entry in enumerate(policies):
        turns, values = _per_turn(entry, key, how)
        name = plot_text(entry["policy"])
        same_as = drawn.setdefault((tuple(turns), tuple(values)), name)
        repeats = sum(1 for trace in data if trace["meta"] == same_as)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name if same_as == name else f"{name} (same as {same_as})",
                "meta": same_as,
                "x": turns,
                "y": values,
                "line": {
                    "color": PALETTE[index % len(PALETTE)],
                    "width": 1.5 if same_as == name else 2.5,
                    "dash": DASHES[repeats % len(DASHES)],
                },
                "hovertemplate": f"turn %{{x}}: %{{y:,}}<extra>{name}</extra>",
            }
        )
    layout = base_layout()
    layout["xaxis"] = {"title": {"text": "turn"}}
    layout["yaxis"] = {"title": {"text": title}}
    layout["hovermode"] = "x unified"
    return {"data": data, "layout": layout, "config": config()}


@ui_view
def replay_page(request: HttpRequest, run_id: int) -> HttpResponse:
    run = get_run_for_user(request.user, run_id)
    text = (request.GET.get("policies") or "").strip() or ",".join(DEFAULT_POLICIES)
    try:
        policies = parse_list(text)
        shown = parse(request.GET["policy"]) if request.GET.get("policy") else None
    except BadPolicy as exc:
        raise BadParameter(str(exc)) from None
    turns = run_turns(run)  # figures only: a refused or cached replay reads no call
    if not turns.calls:
        raise BadParameter("this run has no numbered calls to replay yet")
    last = turns.last_turn
    at_turn = int_param(request.GET, "at_turn", last, 1, last)
    seq = int_param(request.GET, "seq", turns.last_seq, 1, turns.last_seq) if shown else None
    # The recorded policy first, as the page's reference row.
    policies.sort(key=lambda policy: policy.spec != "recorded")
    policies_text = ",".join(policy.spec for policy in policies)
    if shown and shown.spec not in [policy.spec for policy in policies]:
        policies.append(shown)
    try:
        question = question_from(request.GET.getlist("ask"), request.GET.get("expect"))
    except ReaskError as exc:
        raise BadParameter(f"re-ask: {exc}") from None
    endpoint, reask_off = endpoint_for(request.user, run.project)
    keep = [seq] if seq else []
    calls = None
    if endpoint and question:
        calls = run_calls(run)
        keep.append(query_call(calls, at_turn))
    try:
        result = replay_run(
            run, policies, at_turn, calls, keep_windows=keep, rate_name=f"user:{request.user.pk}"
        )
    except TooMuchWork as exc:
        raise BadParameter(str(exc)) from None
    except TooManyReplays as exc:
        return too_many(request, exc)
    reask = reask_replay(endpoint, result, question) if endpoint and question else {}
    by_spec = {entry["policy"]: entry for entry in result["policies"]}
    # The row the others are measured against: the recorded run unless the user picks another.
    baseline = request.GET.get("baseline") or ("recorded" if "recorded" in by_spec else policies[0].spec)
    if baseline not in by_spec:
        raise BadParameter(f"baseline {baseline[:80]!r} is not one of the policies replayed here")
    window = by_spec[shown.spec]["windows"].get(seq) if shown else None
    call_ids = dict(run.calls.filter(seq__isnull=False).values_list("seq", "id"))
    context = {
        "run": run,
        "project": run.project,
        "title": f"Replay · {run.label[:80]}",
        "policies_text": policies_text,
        "result": result,
        "rows": [{**entry, "reask": reask.get(entry["policy"])} for entry in result["policies"]],
        "asked": question,
        "asks": "|".join(question.phrasings) if question else request.GET.get("ask", ""),
        "expect": request.GET.get("expect", ""),
        "reask_endpoint": endpoint,
        "reask_off": reask_off,
        "reask_limits": {"phrasings": MAX_PHRASINGS, "phrasing": MAX_PHRASING, "expect": MAX_EXPECTED},
        "is_admin": has_role(request.user, run.project, Membership.Role.ADMIN),
        "reference": by_spec[baseline],
        "baseline": baseline,
        "baselines": [entry["policy"] for entry in result["policies"]],
        "probes": result["probe_definitions"],
        "fig_window": _figure(result["policies"], "window", "last", "window tokens (turn's last call)"),
        "fig_cost": _figure(result["policies"], "cost_usd", "sum", "cost per turn (USD)"),
        "shown": shown.spec if shown else None,
        "seq": seq,
        "window": window_rows(window) if window is not None else None,
        "call_id": call_ids.get(seq),
        "query_call_id": call_ids.get(result["query_seq"]),
        "can_edit": has_role(request.user, run.project, Membership.Role.EDITOR),
        "max_probes": MAX_PROBES,
    }
    return render_page(request, "ctxview/replay.html", context, regions=("page", "window"))


def too_many(request: HttpRequest, exc: TooManyReplays) -> HttpResponse:
    """429 with Retry-After, its page (or htmx fragment) saying how long to wait."""
    htmx = getattr(request, "htmx", None)
    template = "ctxview/error.html"
    if htmx and not htmx.history_restore_request:
        template += "#page" if htmx.target == "page" else "#message"
    context = {"title": "Too many replays", "message": str(exc), "status": 429}
    response = render(request, template, context, status=429)
    response["Retry-After"] = str(exc.wait)
    return response


@require_POST
@login_required
def replay_probes(request: HttpRequest, run_id: int) -> HttpResponse:
    """Add a probe (``kind``, ``value``) or remove one (``delete``: its id), then back to the page."""
    run = get_run_for_user(request.user, run_id)
    if not has_role(request.user, run.project, Membership.Role.EDITOR):
        return bad_request(request, f"adding probes needs the editor role in project {run.project.slug}")
    back = reverse("cv-replay", args=[run.id])
    try:
        if request.POST.get("delete"):
            probe_id = form_int(request.POST["delete"])  # "²" passes isdigit(), not int(): a 500 before
            writes.remove_probe(run, probe_id if isinstance(probe_id, int) else 0)
        else:
            writes.add_probe(
                run, request.user, kind=request.POST.get("kind"), value=request.POST.get("value")
            )
    except writes.Refused as exc:
        return bad_request(request, str(exc), status=exc.status)
    return redirect(back)
