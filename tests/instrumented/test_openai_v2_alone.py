"""The real openai-v2 instrumentation in an app with no span of its own, against the live test server.

Each call is the root span of a trace of its own and arrives in a batch of its own
(``openai_v2_alone.py``): without a conversation id every call is a run; with one (in the baggage, copied
onto the spans) the conversation is one run, numbered and split into turns as one.
"""

import json
import subprocess
import sys

from ingest.models import Run
from tests.instrumented.scenarios import RESULT_MARKER, ROOT, USER_TURNS, child_environment
from tests.instrumented.test_instrumented import require_packages


def run_app(live_server, key: str, conversation: str | None) -> dict:
    command = [sys.executable, "-m", "tests.instrumented.openai_v2_alone"]
    command += ["--endpoint", live_server.url, "--key", key]
    if conversation:
        command += ["--conversation", conversation]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=180, env=child_environment()
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert done.returncode == 0 and lines, done.stdout[-4000:] + done.stderr[-8000:]
    result = json.loads(lines[-1][len(RESULT_MARKER) :])
    assert [span["parent_span_id"] for span in result["spans"]] == ["", "", ""]
    assert len({span["trace_id"] for span in result["spans"]}) == 3
    return result


def test_an_openai_v2_conversation_with_an_id_is_one_run(live_server, project, key):
    require_packages("openai-v2-span")
    result = run_app(live_server, key, "trip-to-paris")
    assert {span["conversation"] for span in result["spans"]} == {"trip-to-paris"}

    run = Run.objects.get(project=project)
    assert (run.key, run.key_source) == ("trip-to-paris", "gen_ai.conversation.id")
    calls = list(run.calls.order_by("seq").values_list("seq", "turn", "trace_id"))
    assert calls == [
        (1, 1, result["spans"][0]["trace_id"]),
        (2, 1, result["spans"][1]["trace_id"]),
        (3, 2, result["spans"][2]["trace_id"]),
    ]
    assert (run.turn_count, run.title) == (2, USER_TURNS[0])


def test_an_openai_v2_app_without_a_conversation_id_makes_a_run_per_call(live_server, project, key):
    require_packages("openai-v2-span")
    result = run_app(live_server, key, None)
    runs = Run.objects.filter(project=project).order_by("started_at")
    assert [(run.key, run.call_count, run.title) for run in runs] == [
        (span["trace_id"], 1, USER_TURNS[0]) for span in result["spans"]
    ]
