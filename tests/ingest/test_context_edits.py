"""Compaction and context editing as the cause of the cache break that follows, on real recordings.

The recording is Anthropic's beta API through openinference-instrumentation-anthropic (tests/instrumented,
scenario openinference-anthropic-diagnostics): before call 3 the API clears the two tool results (context
editing), so call 3 reads only what call 1 wrote and says it missed 355 tokens."""

import json
from pathlib import Path

import pytest

from ingest.models import Call, Finding, Run

RECORDING = Path(__file__).parents[1] / "data" / "otlp" / "openinference-anthropic-diagnostics.json"


@pytest.fixture
def post_recording(client, key, django_capture_on_commit_callbacks):
    def post(document: dict) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(
                "/v1/traces",
                data=json.dumps(document["traces"]),
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {key}",
            )
        assert response.status_code == 200, response.content

    return post


@pytest.mark.django_db
def test_the_break_after_anthropics_context_edit_is_the_edits_with_the_tokens_it_missed(post_recording):
    post_recording(json.loads(RECORDING.read_text()))
    run = Run.objects.get()
    first, second, third = run.calls.order_by("seq")
    assert [call.analysis["cache"]["cause"] for call in (first, second)] == [None, None]
    cache = third.analysis["cache"]
    assert (cache["cause"], cache["broke"], cache["tokens_rewritten"]) == ("context_edited", True, 355)
    assert cache["detail"]["edits"] == [
        {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 60}
    ]
    assert cache["invalidator_item_id"] == next(
        item["id"] for item in third.full_items() if item["kind"] == "tool_result"
    )
    assert (cache["provider_diagnosis"], cache["disagrees"]) == ("messages_changed", False)
    [finding] = Finding.objects.filter(run=run)
    assert (finding.type, finding.cause, finding.severity, finding.call_seq) == (
        "cache_invalidated",
        "context_edited",
        "info",
        3,
    )
    assert finding.evidence["cost_usd"] == cache["cost_usd"] > 0


@pytest.mark.django_db
def test_without_the_edit_the_same_recording_raises_no_break(post_recording):
    """What the same calls gave before edits were read: the shortfall alone (355 of 2,179 tokens) is
    below the invisible invalidator's threshold, so the cut the edit made went unreported."""
    document = json.loads(RECORDING.read_text())
    text = json.dumps(document["traces"]).replace("context_management_applied_edits", "no_edits_here")
    post_recording({"traces": json.loads(text)})
    third = Call.objects.get(seq=3)
    assert third.analysis["cache"]["cause"] is None
    assert not Finding.objects.exists()


@pytest.mark.django_db
def test_the_cleared_tool_results_left_the_window_at_the_edited_call(post_recording, client, key, alice):
    """Both tool results are still in call 3's request; the API says the model no longer saw them, and
    which edit cleared them."""
    post_recording(json.loads(RECORDING.read_text()))
    run = Run.objects.get()
    third = run.calls.get(seq=3)
    results = [item["id"] for item in third.full_items() if item["kind"] == "tool_result"]
    assert len(results) == 2
    for item_id in results:
        response = client.get(f"/api/v1/runs/{run.id}/items/{item_id}", HTTP_AUTHORIZATION=f"Bearer {key}")
        story = response.json()
        assert [entry["seq"] for entry in story["included"]] == [2, 3]
        assert story["included"][-1]["cleared_by"] == "clear_tool_uses_20250919"
        assert story["left"] == [
            {
                "seq": 3,
                "reason": "clear_tool_uses_20250919",
                "without_reason": False,
                "manifest_source": "derived",
                "context_edit": "clear_tool_uses_20250919",
            }
        ]
    client.force_login(alice)
    page = client.get(f"/runs/{run.id}/item", {"id": results[0]}).content.decode()
    assert "the provider's context editing cleared it before the model saw it" in page
