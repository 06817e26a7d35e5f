"""The replay and the probes of a run through the API.

``GET /api/v1/runs/{id}/replay?policies=recorded,full,sliding_window:12&at_turn=40``: each policy's
billed input, cache figures, cost, breaks, peak window and probes at the query turn (anyone who may
read the run). ``/api/v1/runs/{id}/probes``: the run's probes (GET), a new one (POST, editors) or one
removed (DELETE ``?id=``, editors).
"""

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse

from ctxcore.replay import DEFAULT_POLICIES, BadPolicy, TooMuchWork, parse_list
from ctxcore.replay.reask import ReaskError
from ctxcore.replay.simulate import query_call
from ctxview import writes
from ctxview.access import key_from_request
from ctxview.api_common import (
    api_view,
    error,
    get_run,
    int_query,
    json_body,
    readable_run,
    require_role,
    review_view,
)
from ctxview.params import BadParameter
from ctxview.reask import endpoint_for, question_from, reask_replay
from ctxview.replay import (
    TooManyReplays,
    replay_run,
    run_calls,
    run_probes,
    run_turns,
)
from ctxview.writes import Refused, form_int
from ingest.models import Membership, Project

# What the API gives of each policy (the per-call rows only when asked: a long run has many).
SUMMARY_FIELDS = (
    "policy",
    "calls",
    "billed_input",
    "cache_read",
    "cache_write",
    "uncached",
    "output",
    "cost_usd",
    "unpriced_calls",
    "cache_hit_rate",
    "cache_breaks",
    "tokens_rewritten",
    "breaks_by_cause",
    "peak_window",
    "probes",
)


def policies_param(request: HttpRequest) -> list:
    text = request.GET.get("policies") or ",".join(DEFAULT_POLICIES)
    try:
        return parse_list(text)
    except BadPolicy as exc:
        raise BadParameter(f"policies: {exc}") from None


def _rate_name(request: HttpRequest) -> str:
    """Whose replays these are: the logged-in user, or the ingest key."""
    if request.user.is_authenticated:
        return f"user:{request.user.pk}"
    return f"key:{key_from_request(request)}"


@api_view
def run_replay(request: HttpRequest, projects: QuerySet[Project], run_id: int) -> JsonResponse:
    """The run replayed under each policy asked for, with its probes at the query turn."""
    run = get_run(projects, run_id)
    if run is None:
        return error("no such run", 404)
    policies = policies_param(request)
    turns = run_turns(run)  # figures only: a refused or cached replay reads no call
    if not turns.calls:
        return error("the run has no numbered calls to replay yet", 409)
    last = turns.last_turn
    # A turn past the run's last is read at the last (the answer says which): a client cannot know a
    # run's turns before asking, and the schema cannot state them.
    at_turn = min(int_query(request, "at_turn", last, 1, 2**31 - 1), last)
    with_calls = request.GET.get("calls") in ("1", "true")
    try:
        question = question_from(request.GET.getlist("ask"), request.GET.get("expect"))
    except ReaskError as exc:
        raise BadParameter(f"re-ask: {exc}") from None
    endpoint, reask_off = endpoint_for(request.user, run.project) if question else (None, "")
    calls = run_calls(run) if endpoint else None
    try:
        result = replay_run(
            run,
            policies,
            at_turn,
            calls,
            keep_windows=[query_call(calls, at_turn)] if calls is not None else [],
            rate_name=_rate_name(request),
        )
    except TooMuchWork as exc:
        raise BadParameter(str(exc)) from None
    except TooManyReplays as exc:
        response = error(str(exc), 429)
        response["Retry-After"] = str(exc.wait)
        return response
    reask = reask_replay(endpoint, result, question) if endpoint and question else {}
    return JsonResponse(
        {
            "run_id": run.id,
            "at_turn": result["at_turn"],
            "query_seq": result["query_seq"],
            "last_turn": result["last_turn"],
            # What the request's time budget cut short (empty when nothing was): the rest is what it had.
            "partial": result["partial"],
            "content": result["content"],
            "cheapest_keeping_all": result["cheapest_keeping_all"],
            "probes": result["probe_definitions"],
            "reask": None
            if question is None
            else {"configured": endpoint is not None, "note": None if endpoint else reask_off},
            "policies": [
                {
                    **{name: entry[name] for name in SUMMARY_FIELDS},
                    "reask": reask.get(entry["policy"], {}).get("reask"),
                    "reask_reason": reask.get(entry["policy"], {}).get("reason"),
                    **({"per_call": entry["per_call"]} if with_calls else {}),
                }
                for entry in result["policies"]
            ],
        }
    )


@review_view(["GET", "POST", "DELETE"])
def run_probes_view(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run's probes (GET); add one (POST ``{"kind", "value"}``); remove one (DELETE ``?id=``)."""
    run = readable_run(request, run_id)
    if request.method == "GET":
        return JsonResponse({"probes": run_probes(run, run_calls(run))})
    require_role(request, run.project, Membership.Role.EDITOR)
    if request.method == "DELETE":
        probe_id = form_int(request.GET.get("id") or "")
        if not isinstance(probe_id, int):
            raise Refused("id must be the number of a probe of this run", 400)
        writes.remove_probe(run, probe_id)
        return HttpResponse(status=204)
    data = json_body(request, limit=10_000)
    probe = writes.add_probe(run, request.user, kind=data.get("kind"), value=data.get("value"))
    return JsonResponse(probe.to_dict(), status=201)
