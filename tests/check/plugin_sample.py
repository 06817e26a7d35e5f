"""A test module as a project using ctxview's pytest plugin writes it (tests/check/test_plugin.py runs it
in a pytest of its own): the agent under test is the demo's migration story, recorded through the
ctxview SDK into the plugin's in-memory exporter."""

import pytest

from ctxview.demo import migration
from ctxview.pytest_plugin import assert_in_window, assert_no_cache_breaks


@pytest.fixture
def run_agent(ctxview_spans, monkeypatch):
    def run_agent(fixed: bool) -> None:
        ctxview_spans.configure_sdk(service_name=migration.SERVICE, send_content=True, content_limit=65536)
        if fixed:  # no date line in the system prompt, tool schemas in one key order
            monkeypatch.setattr(migration, "DATE_FROM", migration.STEPS + 1)
            monkeypatch.setattr(migration, "KEY_ORDER_FROM", migration.STEPS + 1)
        migration.record()

    return run_agent


def test_the_fixed_prompt_keeps_the_cache(run_agent, ctxview_spans, ctxview_runs):
    run_agent(fixed=True)
    assert len(ctxview_spans) == 80
    run = ctxview_runs.one()
    assert (run.key, len(run.calls), run.run["turns"]) == ("demo-migration-200-files", 80, 3)
    assert_no_cache_breaks(run, causes=["volatile_system_prompt", "key_order"])
    assert_in_window(run, "system:prompt", at_turn=3)
    assert_in_window(run, "Migrate the 200 files under src/", at_turn=2)  # a text the window holds
    assert_in_window(run, "src/api/billing.ts", at_call=50)  # an item's source


def test_a_date_in_the_prompt_is_caught_with_its_call_and_item(run_agent, ctxview_runs):
    run_agent(fixed=False)
    run = ctxview_runs.one()
    with pytest.raises(AssertionError) as failed:
        assert_no_cache_breaks(run, causes=["volatile_system_prompt"])
    assert str(failed.value).splitlines() == [
        "run demo-migration-200-files: no cache break (volatile_system_prompt): 29 calls broke the cache: "
        "first call 31, cause volatile_system_prompt, item system:prompt",
        "  call 31 (and 28 more calls): cause volatile_system_prompt, item system:prompt, 132,934 tokens "
        "written again, $0.4586; at byte 38: '5:48' became '6:10'",
    ]


def test_an_item_that_left_the_window_is_reported_with_why(run_agent, ctxview_runs):
    run_agent(fixed=True)
    with pytest.raises(AssertionError) as failed:
        assert_in_window(ctxview_runs.one(), "result:step-3", at_turn=2)
    assert str(failed.value) == (
        "run demo-migration-200-files: 'result:step-3' is not in the window at turn 2: call 40 (turn 2, 23 "
        "items) lacks it, and 29 more calls; last in the window at call 14, gone from call 15 (excluded: "
        "stage_complete)"
    )


def test_each_test_sees_only_its_own_spans(ctxview_spans, ctxview_runs):
    assert len(ctxview_spans) == 0
    assert ctxview_runs() == []
