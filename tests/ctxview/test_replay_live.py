"""Issue 30, findings 4 and 5, attacked through a live gunicorn on PostgreSQL: the huge patterns of the
issue are refused fast with the worker's memory flat; a viewer's pages on a run with stored hostile
probes answer within the budget; ten clients flood the replay of a 1,200-call run with twenty probes
(the issue's twelve three-step policies, and replays within the cost limit at every turn) while another
project's user reads their run, whose pages stay fast (median under 1 s, none over 3 s)."""

import random
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import ctxview_sdk
from ctxview.models import Probe
from ctxview.replay import REPLAY_SECONDS
from ingest.models import Membership, Run
from tests import factories, services
from tests.ctxview import ui_data
from tests.ctxview.test_outbound_live import session_for
from tests.ctxview.test_replay_limits import HUGE, STORED_HOSTILE

pytestmark = [pytest.mark.timing, pytest.mark.services, pytest.mark.django_db(transaction=True)]

CALLS = 1_200
WINDOW_MESSAGES = 20
FLOOD_CLIENTS = 10
FLOOD_SECONDS = 20
# The issue's flood: 12 policies of three steps (with 20 probes on 1,200 calls, 8.8-11 s a request).
ISSUE_POLICIES = ",".join(f"sliding_window:{size}+elide:1+pin_end" for size in range(4, 16))
# Within the cost limit: 1,200 calls x 12 steps x 21 = 302,400.
WITHIN_POLICIES = ",".join(f"sliding_window:{size}+elide:1+pin_end" for size in (4, 8, 12, 16))
PROBES = [*(f"shard-{number}" for number in range(10)), *(rf"(.*?[aeiou]){{{n},}}\d" for n in range(10, 20))]
WORDS = "the deploy of shard owner rotated credentials smoke tests window rollback alert".split()


def long_story() -> None:
    """One run of CALLS calls: a system prompt and the last WINDOW_MESSAGES messages of a chat."""
    rng = random.Random(30)
    messages: list[tuple[str, str, str]] = []
    for seq in range(1, CALLS + 1):
        text = " ".join(rng.choice(WORDS) for _ in range(30)) + f" shard-{seq % 10} {seq}"
        messages.append((f"msg-{seq}", "user" if seq % 2 else "assistant", text))
        with ctxview_sdk.call("flood-run", seq, "claude-sonnet-4-5") as call:
            call.add_item("system", "system", "system", content="You are the on-call agent.", tokens=400)
            for item_id, role, content in messages[-WINDOW_MESSAGES:]:
                call.add_item(item_id, "message", "conversation", content=content, role=role, tokens=60)
            call.set_usage({"input_tokens": 1600, "output_tokens": 60})


@pytest.fixture(scope="module")
def web_server(service_env):
    process, url = services.start_web(service_env, name="web-replay-live", server="gunicorn")
    yield process, url
    process.stop()


@pytest.fixture
def web(web_server):
    return web_server[1]


@pytest.fixture
def web_process(web_server):
    return web_server[0]


def test_a_replay_flood_leaves_another_projects_pages_fast(web):
    attacker = factories.user("flood-attacker")
    project, key = factories.project_with_key("flood", owner=attacker)
    started = time.monotonic()
    ui_data.post(ui_data.record("flood-agent", long_story), key)
    run = Run.objects.get(project=project, key="flood-run")
    assert run.calls.count() == CALLS
    for value in PROBES:
        kind = "regex" if value.startswith("(") else "text"
        Probe.objects.create(project=project, run=run, kind=kind, value=value)
    print(f"long run recorded and stored in {time.monotonic() - started:.1f} s", end="; ")

    other = factories.user("flood-bystander")
    elsewhere, other_key = factories.project_with_key("flood-bystander", owner=other)
    ui_data.post(ui_data.demo_requests(), other_key)
    their_run = Run.objects.get(project=elsewhere, key="demo-incident-turn-40")
    attacker_session, bystander = session_for(attacker), session_for(other)
    page = f"{web}/runs/{their_run.id}/"

    def read_page() -> float:
        begun = time.monotonic()
        assert bystander.get(page, timeout=30).status_code == 200
        return time.monotonic() - begun

    read_page()  # warm
    baseline = sorted(read_page() for _ in range(10))
    print(f"bystander's page alone: median {baseline[5]:.3f} s, max {baseline[-1]:.3f} s", end="; ")

    statuses: Counter = Counter()
    took: dict[str, list[float]] = {"issue": [], "within": []}
    latencies: list[float] = []
    stop_at = time.monotonic() + FLOOD_SECONDS
    lock = threading.Lock()

    def flood(number: int) -> None:
        rng = random.Random(number)
        while time.monotonic() < stop_at:
            which = "issue" if rng.random() < 0.5 else "within"
            policies = ISSUE_POLICIES if which == "issue" else WITHIN_POLICIES
            begun = time.monotonic()
            answer = attacker_session.get(
                f"{web}/api/v1/runs/{run.id}/replay",
                params={"policies": policies, "at_turn": rng.randint(1, CALLS)},
                timeout=60,
            )
            with lock:
                statuses[(which, answer.status_code)] += 1
                took[which].append(time.monotonic() - begun)
            if answer.status_code == 200:
                assert answer.json()["policies"], answer.text
            elif answer.status_code == 429:
                assert int(answer.headers["Retry-After"]) >= 1
            else:
                assert answer.status_code == 400 and which == "issue", (answer.status_code, answer.text)
                # "at least" until a replay of the run has counted its standing probes (it has none)
                assert "907,200 (calls x policy steps x (1 + probes)" in answer.json()["error"]

    def browse() -> None:
        while time.monotonic() < stop_at:
            latencies.append(read_page())
            time.sleep(0.2)

    with ThreadPoolExecutor(FLOOD_CLIENTS + 1) as pool:
        futures = [pool.submit(flood, number) for number in range(FLOOD_CLIENTS)]
        futures.append(pool.submit(browse))
        for future in futures:
            future.result(timeout=FLOOD_SECONDS + 120)
    print(f"flood answers: {dict(statuses)}", end="; ")
    print(f"slowest: issue {max(took['issue']):.2f} s, within {max(took['within']):.2f} s", end="; ")
    print(f"bystander's page under the flood: max {max(latencies):.3f} s of {len(latencies)}")
    assert statuses[("issue", 400)] >= 1 and statuses[("within", 429)] >= 1
    assert not [entry for entry in statuses if entry[1] not in (200, 400, 429)]
    assert max(took["issue"]) < 3.0, took["issue"]  # refused before any work, not 8.8-11 s
    # Cut at the budget, then answered (the JSON of 4 policies x 1,200 calls) while eleven clients share
    # the machine's cores: 6.05 s on a quiet machine, 8.3 s on a busier CI one. The attack held a thread
    # 120-150 s.
    assert max(took["within"]) < 2 * REPLAY_SECONDS, took["within"]
    assert len(latencies) >= 10
    # Alone the page takes ~0.03 s; under the flood it shares two cores with ten clients: 0.66-0.78 s
    # typically, and one of 26 at 1.002 s on a busy CI machine. Under the attack a page waited for a
    # replay to free a thread (120-150 s).
    assert sorted(latencies)[len(latencies) // 2] < 1.0, latencies
    assert max(latencies) < 3.0, latencies


def worker_rss_kb(master: int) -> int:
    """The resident memory of the gunicorn master's worker processes, summed (kB)."""
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    total = 0
    for pid in children:
        status = Path(f"/proc/{pid}/status").read_text()
        total += int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
    return total


def test_huge_patterns_and_stored_hostile_probes_leave_the_live_worker_flat(web, web_process):
    owner = factories.user("hostile-owner")
    project, key = factories.project_with_key("hostile-probes", owner=owner)
    ui_data.post(ui_data.demo_requests(), key)
    run = Run.objects.get(project=project, key="demo-incident-turn-40")
    viewer = factories.user("hostile-viewer")
    Membership.objects.create(project=project, user=viewer, role=Membership.Role.VIEWER)
    editor = session_for(owner)
    html = editor.get(f"{web}/runs/{run.id}/replay", timeout=30).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    headers = {"X-CSRFToken": token, "Origin": web, "Referer": f"{web}/runs/{run.id}/replay"}
    master = web_process.popen.pid
    before = worker_rss_kb(master)
    slowest = 0.0
    for value in HUGE * 5:
        started = time.monotonic()
        answer = editor.post(
            f"{web}/api/v1/runs/{run.id}/probes",
            json={"kind": "regex", "value": value},
            headers=headers,
            timeout=30,
        )
        slowest = max(slowest, time.monotonic() - started)
        assert answer.status_code == 400, (value, answer.status_code, answer.text)
        assert "invalid repetition size" in answer.json()["error"]
    grown = worker_rss_kb(master) - before
    print(
        f"20 huge patterns: slowest refusal {slowest:.3f} s, worker RSS {before} kB -> +{grown} kB", end="; "
    )
    assert slowest < 2.0 and grown < 20_000

    for value in STORED_HOSTILE * 2:  # as an older version stored them: 12 rows
        Probe.objects.get_or_create(project=project, run=run, kind="regex", value=value)
    for number in range(12 - Probe.objects.filter(run=run).count()):
        Probe.objects.create(project=project, run=run, kind="regex", value=f"(?<=x{number})y")
    assert Probe.objects.filter(run=run).count() == 12
    reader = session_for(viewer)
    before = worker_rss_kb(master)
    took = {}
    for url in (
        f"/runs/{run.id}/panels/presence",
        f"/runs/{run.id}/",
        f"/runs/{run.id}/replay",
        f"/api/v1/runs/{run.id}/replay",
    ):
        started = time.monotonic()
        answer = reader.get(f"{web}{url}", timeout=60)
        took[url] = round(time.monotonic() - started, 3)
        assert answer.status_code == 200, (url, answer.status_code)
    grown = worker_rss_kb(master) - before
    print(f"a viewer's pages with 12 hostile probes: {took} s, worker RSS +{grown} kB")
    assert max(took.values()) < REPLAY_SECONDS, took
    assert grown < 50_000, grown
