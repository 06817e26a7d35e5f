"""Pages of the coding CLIs' recorded sessions (tests/data/cli, issue 36): a Codex call that reads from a
cache no call of the run shows it wrote (its shared instructions, cached by an earlier session) says so, in
one voice; a Claude Code run's agents table counts the main loop beside the sub-agent it named."""

from django.test import Client

from ingest.models import Run
from tests.ingest.test_session_calls import post_all  # noqa: F401  (a fixture)


def test_a_codex_read_from_a_cache_the_run_never_wrote_is_not_called_nothing_cached(post_all, alice):  # noqa: F811
    post_all("codex", "as-recorded")
    run = Run.objects.get()
    call = run.calls.get(seq=3)
    assert call.cache_read == 5120
    browser = Client()
    browser.force_login(alice)
    body = browser.get(f"/calls/{call.id}/").content.decode()
    assert "reading 5,120 tokens from the cache" in body  # the calibration note, with separators
    assert "reading 5,120 tokens from its cache, but no earlier call of this run" in body
    assert "cached nothing" not in body and "5120" not in body


def test_the_agents_of_a_claude_code_run_add_up_to_the_run(post_all, alice):  # noqa: F811
    post_all("claude-code-detailed", "as-recorded")
    run = Run.objects.get()
    browser = Client()
    browser.force_login(alice)
    response = browser.get(f"/runs/{run.id}/panels/agents")
    agents = response.context["result"]["agents"]
    assert [agent["name"] for agent in agents] == ["general-purpose", ""]
    assert sum(agent["calls"] for agent in agents) == run.calls.filter(seq__isnull=False).count()
    body = response.content.decode()
    assert "no agent named" in body and "1 agent" in body and "2 agents" not in body
