"""The call page: budget, buckets, items with the cache boundary, the invalidator's diff, neighbours."""

import pytest

import ctxview_sdk
from ingest.models import Call, Run
from tests import factories
from tests.ctxview import ui_data, ui_fixtures
from tests.ctxview.ui_data import IMG, SCRIPT

inspect = ui_fixtures.inspect
stranger_client = ui_fixtures.stranger_client
viewer_client = ui_fixtures.viewer_client

HTMX = {"HTTP_HX_REQUEST": "true"}


def call_at(run, seq: int) -> Call:
    return Call.objects.get(run=run, seq=seq)


def test_a_call_that_broke_the_cache_shows_its_invalidator_and_the_diff(viewer_client, inspect):
    call = call_at(inspect.migration, 31)  # the first call whose system prompt carries a new time
    response = viewer_client.get(f"/calls/{call.id}/")
    assert response.status_code == 200
    invalidation = response.context["invalidation"]
    assert invalidation["cause"] == "volatile_system_prompt"
    assert invalidation["old"]["id"] == invalidation["new"]["id"] == "system:prompt"
    assert invalidation["reference"]["seq"] == 30
    body = response.content.decode()
    assert "Cache broken: volatile_system_prompt" in body
    assert "<del>" in body and "<ins>" in body and "The changed value is a timestamp" in body
    assert 'class="invalidator' in body and "invalidator</span>" in body


def test_a_break_by_removed_items_says_what_was_removed_instead_of_a_diff(viewer_client, inspect):
    call = factories.calls_with_cache(inspect.incident.calls.all(), change="removed")[0]
    response = viewer_client.get(f"/calls/{call.id}/")
    invalidation = response.context["invalidation"]
    story = invalidation["story"]
    assert invalidation["diff"] is None and story["removed_count"] >= 1
    first = story["removed"][0]
    assert first["id"] == call.analysis["cache"]["detail"]["removed_item_id"]
    assert first["reason"] == "sliding_window"
    body = response.content.decode()
    assert "<del>" not in body and 'class="rewrite-story"' in body
    assert f"everything from position {story['position']} on" in body


def test_the_items_table_has_every_column_and_the_cache_boundary(viewer_client, inspect):
    call = factories.calls_with_cache(inspect.incident.calls.all(), broke=True)[-1]
    response = viewer_client.get(f"/calls/{call.id}/")
    table = response.context["table"]
    assert table["boundary"] == call.analysis["cache"]["reusable_items"]
    body = response.content.decode()
    for column in ("Kind", "Bucket", "Mode", "Tokens", "Version", "Source", "Trust", "Pinned", "Position"):
        assert "<th" in body and f">{column}<" in body, column
    assert "cache boundary" in body and "memory:oncall-notes" in body and "system:prompt" in body
    assert "Budget and buckets" in body and "200,000" in body and "reserved for the answer" in body
    assert 'class="gauge"' in body and 'class="b-tools"' in body


def test_estimated_token_counts_are_marked(viewer_client, inspect):
    call = call_at(inspect.hostile, 1)
    response = viewer_client.get(f"/calls/{call.id}/")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert all(row["tokens_estimated"] is False for row in rows)  # the sender measured them
    incident = call_at(inspect.incident, 1)
    assert 'title="estimated"' not in viewer_client.get(f"/calls/{incident.id}/").content.decode()


def test_excluded_items_conflicts_and_findings_with_their_fix(viewer_client, inspect):
    run = inspect.timeout
    finding = run.findings.get(type="superseded_included")
    call = call_at(run, finding.call_seq)
    body = viewer_client.get(f"/calls/{call.id}/").content.decode()
    assert "superseded_included" in body and "plan@v1" in body
    assert "Exclude an item once another included item supersedes it." in body
    assert "log:order-service-0940" in body and "budget" in body  # excluded, with its reason


def test_previous_and_next_call_and_turn_with_the_keyboard(viewer_client, inspect):
    run = inspect.incident
    call = call_at(run, 10)
    body = viewer_client.get(f"/calls/{call.id}/").content.decode()
    for key, seq in (("ArrowLeft", 9), ("ArrowRight", 11)):
        assert f'href="/calls/{call_at(run, seq).id}/" data-hotkey="{key}"' in body
    assert 'data-hotkey="Shift+ArrowLeft"' in body and 'data-hotkey="Shift+ArrowRight"' in body
    first = viewer_client.get(f"/calls/{call_at(run, 1).id}/").content.decode()
    assert 'data-hotkey="ArrowLeft"' not in first and 'data-hotkey="ArrowRight"' in first


def test_htmx_gets_the_page_region_or_the_items_only(viewer_client, inspect):
    call = call_at(inspect.incident, 45)
    page = viewer_client.get(f"/calls/{call.id}/", **HTMX, HTTP_HX_TARGET="page")
    assert b"<html" not in page.content and b"Prefix chain and cache" in page.content
    items = viewer_client.get(f"/calls/{call.id}/?all=1", **HTMX, HTTP_HX_TARGET="items")
    body = items.content.decode()
    assert "<html" not in body and "<table" in body and "Prefix chain" not in body


def test_long_item_lists_are_cut_until_asked(viewer_client, inspect, monkeypatch):
    from ctxview import views_call

    monkeypatch.setattr(views_call, "ITEMS_SHOWN", 5)
    call = call_at(inspect.incident, 45)
    response = viewer_client.get(f"/calls/{call.id}/")
    assert len(response.context["rows"]) == 5 and b"Show the other 21 items" in response.content
    assert len(viewer_client.get(f"/calls/{call.id}/?all=1").context["rows"]) == 26


def test_an_items_content_on_demand(viewer_client, inspect):
    call = call_at(inspect.incident, 30)
    position = next(item["position"] for item in call.full_items() if item["id"] == "fact:affected-shard")
    response = viewer_client.get(
        f"/calls/{call.id}/content?pos={position}", **HTMX, HTTP_HX_TARGET="item-content"
    )
    assert response.status_code == 200 and b"<html" not in response.content
    assert b'<pre class="content">Confirmed: the affected shard is pay-shard-7' in response.content
    assert b"its lifecycle" in response.content


@pytest.mark.parametrize(
    "query, message",
    [
        ("", "pos (the item&#x27;s position in the window) is required"),
        ("pos=999", "pos must be between 0 and 25"),
        ("pos=a", "pos must be a whole number"),
    ],
)
def test_content_rejects_a_bad_position(viewer_client, inspect, query, message):
    call = call_at(inspect.incident, 45)
    response = viewer_client.get(f"/calls/{call.id}/content?{query}", **HTMX, HTTP_HX_TARGET="item-content")
    assert response.status_code == 400 and message in response.content.decode()


def test_another_projects_call_is_a_404(stranger_client, inspect):
    call = call_at(inspect.incident, 45)
    assert stranger_client.get(f"/calls/{call.id}/").status_code == 404
    assert stranger_client.get(f"/calls/{call.id}/content?pos=0").status_code == 404


def test_the_call_page_escapes_what_the_trace_sent(viewer_client, inspect):
    call = call_at(inspect.hostile, 2)
    body = viewer_client.get(f"/calls/{call.id}/").content.decode()
    assert SCRIPT not in body and IMG not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "&lt;img src=x onerror=alert(2)&gt;" in body
    assert "<del>" in body or "<ins>" in body  # the system prompt changed: its diff is shown, escaped
    for position in range(len(call.items)):
        content = viewer_client.get(f"/calls/{call.id}/content?pos={position}").content.decode()
        assert SCRIPT not in content and IMG not in content


# --- Calibration -------------------------------------------------------------------------------

CALIBRATION_RUN = "provider-counts-more"
TOOL, SYSTEM, MESSAGE = 500, 500, 100  # our estimates
WRITTEN = 1900  # the provider's count of the first call's prompt, all of it cached


def calibration_story() -> None:
    """Two calls whose provider reports more cached tokens than our estimate of the same prefix (its
    tokenizer, its tool-use preamble): the second reads what the first wrote."""
    for turn in (1, 2):
        with ctxview_sdk.call(CALIBRATION_RUN, turn, "claude-sonnet-4-5") as call:
            call.add_item("tool:lookup", "tool", "tools", content={"name": "lookup"}, tokens=TOOL)
            call.add_item(
                "system", "system", "system", content="You are billing.", role="system", tokens=SYSTEM
            )
            for number in range(1, turn + 1):
                call.add_item(
                    f"m{number}", "message", "conversation", content=f"message {number}", tokens=MESSAGE
                )
            call.set_usage(
                {
                    "input_tokens": 150,
                    "cache_creation_input_tokens": WRITTEN if turn == 1 else 0,
                    "cache_read_input_tokens": 0 if turn == 1 else WRITTEN,
                    "output_tokens": 10,
                }
            )


@pytest.fixture(scope="module")
def calibrated(django_db_setup, django_db_blocker, inspect):
    with django_db_blocker.unblock():
        ui_data.post(ui_data.record("svc-calibration", calibration_story), inspect.key)
        yield Run.objects.get(project=inspect.project, key=CALIBRATION_RUN)


def test_a_read_our_estimate_disagrees_with_shows_a_calibration_note_not_a_finding(viewer_client, calibrated):
    call = call_at(calibrated, 2)
    cache = call.analysis["cache"]
    assert (cache["reusable_tokens"], cache["reported_read"]) == (TOOL + SYSTEM + MESSAGE, WRITTEN)
    assert cache["cause"] is None and calibrated.findings.filter(call_seq=2).count() == 0

    body = viewer_client.get(f"/calls/{call.id}/").content.decode()
    assert "Calibration note:" in body
    assert "the reported figure stands" in body and f"the provider reports reading {WRITTEN:,} tokens" in body


def test_the_calibration_note_is_escaped(viewer_client, calibrated):
    call = call_at(calibrated, 2)
    analysis = call.analysis
    analysis["cache"]["calibration_note"] = SCRIPT  # nothing of the trace goes in it; the page escapes anyway
    Call.objects.filter(id=call.id).update(analysis=analysis)

    body = viewer_client.get(f"/calls/{call.id}/").content.decode()
    assert SCRIPT not in body and "Calibration note: &lt;script&gt;" in body


def test_a_break_says_what_its_cause_cost_over_the_whole_run(viewer_client, inspect):
    call = call_at(inspect.migration, 40)
    response = viewer_client.get(f"/calls/{call.id}/")
    total = response.context["cause_total"]
    breaks = [
        c.analysis["cache"]
        for c in inspect.migration.calls.order_by("seq")
        if (c.analysis or {}).get("cache", {}).get("cause") == "volatile_system_prompt"
    ]
    assert total["count"] == len(breaks) > 1 and total["first"]["seq"] == 31
    assert total["tokens_rewritten"] == sum(entry["tokens_rewritten"] for entry in breaks)
    body = response.content.decode()
    assert f"broke the cache {len(breaks)} times, from" in body
    assert "in all" in body and "Every cause on the run" in body
    # A call that broke nothing sums nothing.
    assert viewer_client.get(f"/calls/{call_at(inspect.migration, 2).id}/").context["cause_total"] is None


# --- A policy's window in the call view (?policy=spec) --------------------------------------------


def test_a_policys_window_in_the_call_view_is_labelled_a_replay_and_says_what_it_keeps(
    viewer_client, inspect
):
    from ctxcore.replay import parse
    from ctxview.replay import replay_run, window_rows

    run = inspect.incident
    last = run.calls.filter(seq__isnull=False).order_by("-seq").first()
    sliding = viewer_client.get(f"/calls/{last.id}/?policy=sliding_window:12")
    assert sliding.status_code == 200
    body = sliding.content.decode()
    assert "Replayed under <code>sliding_window:12</code>" in body and "replay, not what was sent" in body
    replayed = sliding.context["replayed"]
    expected = replay_run(run, [parse("sliding_window:12")], keep_windows=[last.seq])["policies"][0]
    assert replayed["window"] == window_rows(expected["windows"][last.seq])
    assert replayed["figures"] == expected["per_call"][-1]
    probes = {probe["probe"]: probe["how"] for probe in replayed["probes"]}
    assert probes["fact:affected-shard"] == "absent" and "fact:affected-shard" in replayed["left_out"]
    # The recorded call's own figures stay on the page beside the replay.
    assert sliding.context["call"].id == last.id and sliding.context["table"]["rows"]

    verbatim = viewer_client.get(f"/calls/{last.id}/?policy=user_verbatim:4").context["replayed"]
    assert {probe["probe"]: probe["how"] for probe in verbatim["probes"]}["fact:affected-shard"] == "verbatim"
    elided = viewer_client.get(f"/calls/{last.id}/?policy=elide:4").context["replayed"]
    stubs = [row for row in elided["window"] if row["how"] == "stub"]
    assert stubs and all(row["made"] and row["replaces"] == 1 and row["tokens"] == 12 for row in stubs)
    # What a stub stands for is not left out.
    assert not {row["id"] for row in stubs} & set(elided["left_out"])
    summary = viewer_client.get(f"/calls/{last.id}/?policy=compaction:10").context["replayed"]
    assert [row["how"] for row in summary["window"] if row["made"]] == ["summary (unknown contents)"]
    assert 'id="policy-window"' not in viewer_client.get(f"/calls/{last.id}/").content.decode()
    assert viewer_client.get(f"/calls/{last.id}/").context["replayed"] is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("window:3", "policy: unknown policy &#x27;window&#x27;"),
        ("sliding_window", "policy: sliding_window is written sliding_window:N"),
        ("turns:5-2", "policy: turns is written turns:A-B with 1 &lt;= A &lt;= B"),
        ("full+recorded", "policy: recorded and full can only start a policy"),
    ],
)
def test_a_bad_policy_in_the_call_view_is_a_400_that_says_why(viewer_client, inspect, spec, message):
    call = call_at(inspect.incident, 3)
    response = viewer_client.get(f"/calls/{call.id}/", {"policy": spec})
    assert response.status_code == 400 and message in response.content.decode()


def test_a_replayed_window_of_hostile_content_stays_text(viewer_client, inspect):
    call = call_at(inspect.hostile, 2)
    response = viewer_client.get(f"/calls/{call.id}/?policy=full")
    assert response.status_code == 200 and response.context["replayed"]["window"]
    body = response.content.decode()
    assert SCRIPT not in body and IMG not in body


def test_the_replay_pages_policy_rows_link_to_the_call_view(viewer_client, inspect):
    run = inspect.incident
    page = viewer_client.get(f"/runs/{run.id}/replay?policies=recorded,elide:4")
    last = run.calls.filter(seq__isnull=False).order_by("-seq").first()
    body = page.content.decode()
    assert f'href="/calls/{last.id}/?policy=elide%3A4"' in body
    assert f'href="/calls/{last.id}/?policy=recorded"' in body


def uncounted_exclusions_story() -> None:
    with ctxview_sdk.call("uncounted-exclusions", 1, "claude-sonnet-4-5") as call:
        call.add_item("system", "system", "system", content="You are terse.", role="system", tokens=50)
        call.exclude("doc:old-runbook", "stale")  # what most builders say of what they left out: no count
        call.exclude("doc:faq", "relevance")
        call.set_usage({"input_tokens": 50, "output_tokens": 5})


@pytest.fixture(scope="module")
def uncounted(django_db_setup, django_db_blocker, inspect):
    with django_db_blocker.unblock():
        ui_data.post(ui_data.record("svc-uncounted", uncounted_exclusions_story), inspect.key)
        yield Run.objects.get(project=inspect.project, key="uncounted-exclusions")


def test_the_excluded_table_has_a_column_only_where_some_item_has_a_value(viewer_client, inspect, uncounted):
    def excluded_table(call) -> str:
        body = viewer_client.get(f"/calls/{call.id}/").content.decode()
        return body.split("candidates the context builder left out", 1)[1].split("</table>")[0]

    table = excluded_table(call_at(uncounted, 1))
    assert "doc:old-runbook" in table and "relevance" in table
    assert "Tokens" not in table and "Source" not in table and "Version" not in table  # empty all the way

    run = inspect.timeout  # the demo counts what it left out
    table = excluded_table(call_at(run, run.findings.get(type="superseded_included").call_seq))
    assert '<th class="num">Tokens</th>' in table and "40,312" in table


def test_a_key_order_break_names_the_keys_that_moved(viewer_client, inspect):
    call = next(
        call
        for call in inspect.migration.calls.order_by("seq")
        if (call.analysis or {}).get("cache", {}).get("cause") == "key_order"
    )
    response = viewer_client.get(f"/calls/{call.id}/")
    moved = response.context["invalidation"]["moved_keys"]
    assert moved and sorted(moved[0]["before"]) == sorted(moved[0]["after"]) != []
    assert moved[0]["before"] != moved[0]["after"]
    body = response.content.decode()
    assert "its keys in another order" in body and "Keys in this call" in body
    assert "<summary>The byte diff</summary>" in body  # kept, folded
