"""The coding CLIs' recordings through the receiver and the batch task (tasks in-process), in any order.

Each export body the CLI sent is posted again as it was recorded (OTLP/JSON); the calls, turns, usage
and subagents stored must not depend on whether logs or spans came first.
"""

import json

import pytest

from ingest import session_calls, sessions
from ingest.models import Call, LogRecord, Run, Span
from tests.cli import view

SCENARIOS = {
    "claude-code-default": "claude-code",
    "claude-code-traces": "claude-code",
    "claude-code-detailed": "claude-code",
    "codex": "codex",
    "gemini-cli": "gemini-cli",
}
ORDERS = ["as-recorded", "logs-first", "spans-first", "reversed"]


def exports(scenario: str, order: str) -> list[dict]:
    found = [export for export in view.load(scenario)["exports"] if export["signal"] in ("traces", "logs")]
    if order == "logs-first":
        found.sort(key=lambda export: export["signal"] != "logs")
    elif order == "spans-first":
        found.sort(key=lambda export: export["signal"] != "traces")
    elif order == "reversed":
        found.reverse()
    return found


@pytest.fixture
def post_all(client, key, django_capture_on_commit_callbacks):
    """Post a recording's exports; each batch is processed (and its runs analysed) as it commits."""

    def post(scenario: str, order: str) -> None:
        for export in exports(scenario, order):
            with django_capture_on_commit_callbacks(execute=True):
                _post(client, key, export)

    return post


def _post(client, key: str, export: dict) -> None:
    response = client.post(
        f"/v1/{export['signal']}",
        data=json.dumps(export["body"]),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content


def stored(run: Run) -> list[tuple]:
    return [
        (
            call.seq,
            call.turn,
            call.response_id,
            call.agent_name,
            call.request_model,
            call.usage_dict(),
            len(call.items),
        )
        for call in run.calls.order_by("seq")
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_cli_session_is_one_run_whatever_arrives_first(post_all, scenario):
    results = []
    for order in ORDERS:
        post_all(scenario, order)
        run = Run.objects.get()
        doc = view.load(scenario)
        requests = view.model_requests(doc)
        assert run.call_count == len(requests) == run.calls.count()
        assert run.turn_count == 2  # the second `claude -p --continue` / `exec resume` / `--resume`
        assert run.analysed_seq == run.call_count
        assert [call.analysis["cache"]["broke"] for call in run.calls.order_by("seq")] == [False] * len(
            requests
        )
        results.append(stored(run))
        for model in (Run, LogRecord, Span):  # the next order starts from nothing
            model.objects.all().delete()
    assert all(result == results[0] for result in results)


@pytest.mark.django_db
def test_claude_code_default_mode_shows_usage_cost_and_the_subagent(post_all):
    post_all("claude-code-default", "as-recorded")
    doc = view.load("claude-code-default")
    run = Run.objects.get()
    steps = {request["request_id"]: request for request in view.model_requests(doc)}
    for call in run.calls.order_by("seq"):
        reported = steps[call.response_id]["usage"]
        assert (call.uncached, call.cache_read, call.cache_write, call.output) == (
            reported["input_tokens"],
            reported["cache_read_input_tokens"],
            reported["cache_creation_input_tokens"],
            reported["output_tokens"],
        )
        assert call.agent_name == (
            "general-purpose" if steps[call.response_id]["step"].startswith("sub") else ""
        )
        assert call.usage_raw["reported.cost_usd"] > 0
        assert call.turn == (2 if steps[call.response_id]["step"] == "turn-2" else 1)
    assert run.cache_read == sum(request["usage"]["cache_read_input_tokens"] for request in steps.values())
    assert (run.key, run.agent_name) == (run.calls.first().run.key, "claude-code")


@pytest.mark.django_db
def test_a_session_delivered_twice_is_stored_once(post_all):
    post_all("codex", "as-recorded")
    first = stored(Run.objects.get())
    post_all("codex", "reversed")
    assert stored(Run.objects.get()) == first
    assert Call.objects.count() == len(first)


@pytest.mark.django_db
def test_a_hash_only_project_keeps_the_usage_and_drops_the_cli_content(post_all, project):
    project.hash_only = True
    project.save()
    post_all("claude-code-detailed", "as-recorded")
    run = Run.objects.get()
    assert run.call_count == 6 and all(call.items == [] for call in run.calls.all())
    assert not LogRecord.objects.filter(attributes__has_key="system_prompt").exists()
    assert not LogRecord.objects.filter(attributes__has_key="body").exists()


def test_only_rows_of_a_cli_session_touch_one():
    doc = view.load("claude-code-default")
    touched = session_calls.touched("logs", view.logs(doc))
    assert [(session.family.name, session.key) for session in touched] == [
        ("claude-code", view.named(view.logs(doc), "api_request")[0]["attributes"]["session.id"])
    ]
    assert session_calls.touched("logs", view.named(view.logs(doc), "plugin_loaded")) == []


@pytest.mark.django_db
def test_a_claude_code_detailed_call_page_shows_its_window_and_the_run_page_its_subagent(
    post_all, client, alice
):
    post_all("claude-code-detailed", "as-recorded")
    run = Run.objects.get()
    client.force_login(alice)
    assert client.get(f"/runs/{run.id}/").status_code == 200
    for call in run.calls.order_by("seq"):
        page = client.get(f"/calls/{call.id}/").content.decode()
        assert "tool:Read" in page and "system:0" in page
        shown = f'agent <b class="agent">{call.agent_name}</b>' in page
        assert shown == (call.agent_name == "general-purpose")  # the subagent's calls say whose they are


@pytest.mark.django_db
@pytest.mark.parametrize("step", ["sub-answer", "main-answer", "turn-2"])
def test_request_bodies_long_before_a_batch_are_read_thin_and_change_nothing(post_all, step):
    post_all("claude-code-detailed", "as-recorded")
    run = Run.objects.get()
    family = next(family for family in session_calls.SESSION_FAMILIES if family.name == "claude-code")
    session = session_calls._Session(family, run.key, 0)
    request_id = next(
        r["request_id"] for r in view.model_requests(view.load("claude-code-detailed")) if r["step"] == step
    )
    since = run.calls.get(response_id=request_id).start_ns
    spans, full_logs = session_calls._stored_rows(run.project_id, session, since_ns=0)
    _, thin_logs = session_calls._stored_rows(run.project_id, session, since_ns=since)
    thinned = [log for log in thin_logs if log["attributes"].get("event.name") == "api_request_body"]
    assert any("body" not in log["attributes"] for log in thinned)  # read thin before the horizon
    assert any("body" in log["attributes"] for log in thinned)  # and whole after it
    full = sessions.records(family, spans, full_logs, since_ns=since)
    assert full and sessions.records(family, spans, thin_logs, since_ns=since) == full


@pytest.mark.django_db
def test_a_claude_code_subagents_cost_prices_its_one_hour_writes_at_the_one_hour_rate(post_all):
    """Claude Code reports its 5-minute and 1-hour writes apart (the subagent's first call wrote 950
    tokens to the 1-hour cache): the agent's cost is the sum of its calls' costs, each write at its rate."""
    from ctxcore.analysis import price_for
    from ctxcore.analysis.accounting import call_cost
    from ctxview.panels import agents
    from ctxview.queries import agent_groups
    from ingest.analyse import call_input

    post_all("claude-code-default", "as-recorded")
    run = Run.objects.get()
    price = price_for("claude-sonnet-4-5")  # the recording's model is a fake's name: give it a price
    [group] = agent_groups([run.id])[run.id]
    assert (group["agent"], group["cache_write_1h"]) == ("general-purpose", 950)
    [total] = agents.agent_totals([group], lambda model: price)
    calls = run.calls.filter(agent_name="general-purpose")
    by_call = sum(call_cost(call_input(call), price)[0] for call in calls)
    assert total["cost_usd"] == round(by_call, 6)
    at_five_minutes = by_call - 950 * (price.cache_write_1h - price.cache_write_5m) / 1e6
    assert total["cost_usd"] > round(at_five_minutes, 6)  # what the agent cost read before


@pytest.mark.django_db
def test_codex_calls_are_numbered_in_the_order_of_their_requests_at_their_real_time(post_all):
    """Codex's log records carry a time of 0 (issue 33): the observed time orders and dates its calls."""
    post_all("codex", "as-recorded")
    run = Run.objects.get()
    requests = view.model_requests(view.load("codex"))
    calls = list(run.calls.order_by("seq"))
    assert [call.seq for call in calls] == [1, 2, 3]
    assert [(call.prompt_total, call.output) for call in calls] == [
        (request["usage"]["input_tokens"], request["usage"]["output_tokens"]) for request in requests
    ]
    assert [call.turn for call in calls] == [1, 1, 2]
    assert all(call.started_at.year >= 2026 for call in calls)
    assert run.started_at.year >= 2026 and run.started_at == calls[0].started_at
    assert [call.start_ns for call in calls] == sorted(call.start_ns for call in calls)


FIRST_PROMPT = "[turn-1] Read notes.txt and tell me when the deploy window is."
# What each recording names its session by: Claude Code withholds prompts unless OTEL_LOG_USER_PROMPTS is
# set, and its default and traces modes carry no messages: those sessions keep their key alone.
TITLES = {
    "claude-code-default": "",
    "claude-code-traces": "",
    "claude-code-detailed": FIRST_PROMPT,
    "codex": FIRST_PROMPT,
    "gemini-cli": FIRST_PROMPT,
}


@pytest.mark.django_db
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_cli_session_is_titled_by_its_first_prompt_whatever_arrives_first(post_all, scenario):
    for order in ORDERS:
        post_all(scenario, order)
        assert Run.objects.get().title == TITLES[scenario], order
        for model in (Run, LogRecord, Span):
            model.objects.all().delete()


def prompt_records(export: dict, keep: bool) -> dict:
    """The export with only its records of user prompts (``keep``), or without them."""
    body = json.loads(json.dumps(export["body"]))
    for resource in body.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            scope["logRecords"] = [
                record
                for record in scope.get("logRecords", [])
                if (_attribute(record, "event.name") in ("user_prompt", "codex.user_prompt")) == keep
            ]
    return {**export, "body": body}


def _attribute(record: dict, name: str):
    for attribute in record.get("attributes", []):
        if attribute["key"] == name:
            return attribute["value"].get("stringValue")
    return None


def with_prompts(export: dict, prompt) -> dict:
    """The export with each user prompt record's text (``prompt`` and ``prompt_text``) ``prompt()``."""
    body = json.loads(json.dumps(export["body"]))
    for resource in body.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            for record in scope.get("logRecords", []):
                attributes = [
                    a for a in record.get("attributes", []) if a["key"] in ("prompt", "prompt_text")
                ]
                text = prompt() if attributes else None
                for attribute in attributes:
                    attribute["value"] = {"stringValue": text}
    return {**export, "body": body}


@pytest.fixture
def post_each(client, key, django_capture_on_commit_callbacks):
    """Post these exports, each processed as it commits."""

    def post(exports: list[dict]) -> None:
        for export in exports:
            with django_capture_on_commit_callbacks(execute=True):
                _post(client, key, export)

    return post


@pytest.mark.django_db
def test_a_claude_code_prompt_logged_after_its_calls_titles_the_session(post_each):
    """Claude Code with OTEL_LOG_USER_PROMPTS=1 and no detailed mode: its calls carry no messages, and
    the prompt's record is no row its calls are assembled from; it arrives last here."""
    prompts = iter(["Why is the deploy window on Friday?", "Thanks. Who owns the deploy?"])
    logged = [
        with_prompts(export, lambda: next(prompts))
        for export in exports("claude-code-default", "as-recorded")
    ]
    post_each(
        [prompt_records(export, keep=False) if export["signal"] == "logs" else export for export in logged]
    )
    run = Run.objects.get()
    assert run.title == "" and run.call_count == 6
    post_each([prompt_records(export, keep=True) for export in logged if export["signal"] == "logs"])
    assert Run.objects.get().title == "Why is the deploy window on Friday?"


@pytest.mark.django_db
def test_a_codex_prompt_it_was_told_not_to_log_gives_no_title(post_each):
    post_each([with_prompts(export, lambda: "[REDACTED]") for export in exports("codex", "as-recorded")])
    run = Run.objects.get()
    assert (run.title, run.turn_count) == ("", 2)


@pytest.mark.django_db
def test_a_hash_only_project_gives_a_cli_session_no_title(post_all, project):
    project.hash_only = True
    project.save()
    post_all("codex", "as-recorded")
    assert Run.objects.get().title == ""
