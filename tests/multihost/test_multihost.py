"""ctxview over several hosts (network namespaces on a bridge, tests/multihost/network.py): PostgreSQL and
Redis on one, nginx + gunicorn and the OTLP/gRPC receiver on another, a Celery worker on each of two
more. A load goes through both receivers while (a) a worker host dies whole (every process SIGKILLed),
(b) a worker host is cut from the database host for CUT_SECONDS (its link down), (c) the broker
restarts. After each the backlog drains (the sweeper, on the ingest host) and every acknowledged span is
stored exactly once, counted from the database. Then the same loads, sent to ctxview on a single host,
give every run the same numbering, turns and analyses.
"""

import copy
import subprocess
import sys
import time

import pytest

from tests import summary
from tests.faults import stack
from tests.multihost import deployment
from tests.multihost.deployment import Traffic

pytestmark = pytest.mark.services

CLIENTS = 2  # per receiver
SPANS_PER_EXPORT = 20
CONVERSATIONS = 3  # runs per client, each in every export: runs cross batches (and hosts)
# Exports per client and seconds between a client's exports: each load outlasts its fault.
LOADS = {"killed": (16, 0.4), "cut": (56, 0.5), "broker": (20, 0.4)}
CUT_SECONDS = 20
IDLE_TIMEOUT = "terminating connection due to idle-in-transaction timeout"  # PostgreSQL's log line
BROKER_DOWN_SECONDS = 3


def make_load(number: int, exports: int) -> dict[str, list]:
    """Finished spans for each client of each receiver (cache breaks included for the analyses)."""
    seeds = [7000 + 10 * number + client for client in range(2 * CLIENTS)]
    batches = [
        stack.make_batches(exports, SPANS_PER_EXPORT, CONVERSATIONS, seed, cache=True) for seed in seeds
    ]
    return {"http": batches[:CLIENTS], "grpc": batches[CLIENTS:]}


@pytest.fixture(scope="module")
def loads() -> dict[str, dict]:
    """The same spans (ids included) for the multi-host deployment and the single-host one."""
    return {name: make_load(number, exports) for number, (name, (exports, _)) in enumerate(LOADS.items())}


def send(target: deployment.Deployment, loads: dict[str, dict], name: str) -> Traffic:
    return Traffic.to(target, loads[name], LOADS[name][1]).start()


def finish(target: deployment.Deployment, traffic: Traffic, name: str, scenario: str, fault: str):
    """Wait for the load, drain the backlog, count this load's spans, check each acknowledged one is
    stored once."""
    traffic.join()
    drained = stack.recover(target.stack)
    load = traffic.total()
    fault += f"; HTTP answers: {traffic.answers()}"
    result = stack.tally(target.stack, load, f"multihost: {scenario}", fault, drained, scoped=True)
    summary.FAULT_ROWS.append(result.row())
    print("\n" + stack.format_table([result.row()]))
    print(
        f"multihost {scenario}: {len(load.sent)} spans sent, {result.acknowledged} acknowledged, "
        f"{result.stored} stored, {result.lost} lost, {result.duplicated} duplicated; backlog drained in "
        f"{drained:.1f} s"
    )
    target.sent.append(name)
    assert result.acknowledged == len(load.sent), "every export acknowledged (the receivers stayed up)"
    assert (result.lost, result.duplicated, result.stored_unacknowledged) == (0, 0, 0), result
    assert result.calls_missing == 0, "a call for every acknowledged span"
    assert (result.runs_not_analysed, result.runs_misnumbered, result.batches_failed) == (0, 0, 0), result
    assert result.runs == 2 * CLIENTS * CONVERSATIONS
    return result


def log_size(worker: stack.Worker) -> int:
    return worker.process.log_path.stat().st_size


def batches_stored(worker: stack.Worker, since: int = 0, until: int | None = None) -> int:
    """Batch tasks the worker's log says succeeded, between two of its sizes."""
    log = worker.process.log_path.read_bytes()[since:until].decode(errors="replace")
    return sum(1 for line in log.splitlines() if "process_batch_task[" in line and "succeeded" in line)


def in_a_batch(target: deployment.Deployment, worker: stack.Worker, traffic: Traffic, until: float) -> bool:
    """Wait until ``worker`` is inside a batch's transaction, but no longer than until the load is
    ``until`` done (the fault must still land mid-load); whether it was."""
    while traffic.progress() < until:
        if deployment.in_flight(target.stack, worker):
            return True
        time.sleep(0.02)
    return False


def test_a_worker_host_killed_whole(multihost, loads, network):
    w1, w2 = multihost.worker("w1"), multihost.worker("w2")
    traffic = send(multihost, loads, "killed")
    traffic.wait_until(0.25)
    mid_batch = in_a_batch(multihost, w1, traffic, until=0.6)  # its transaction dies with the host
    before, w2_at_kill = traffic.acknowledged(), log_size(w2)
    killed = network["w1"].kill_all()
    w1.process.popen.wait(timeout=10)
    w1.process.stop()
    multihost.stack.workers.remove(w1)
    stack.services.wait_for(lambda: not network["w1"].pids(), 10, "every process of w1 to be gone")
    at_kill = traffic.acknowledged()
    traffic.join()
    after = traffic.acknowledged() - at_kill
    try:  # w1 stays down until the backlog has drained: w2 takes it all
        finish(
            multihost,
            traffic,
            "killed",
            "(a) worker host killed",
            f"SIGKILL to all {len(killed)} processes of host w1 (celery prefork: parent and pool process)"
            f"{', inside a batch' if mid_batch else ''}, {before} spans acknowledged before, {after} after; "
            "w1 down while the backlog drained on w2",
        )
        assert w1.pid in killed and len(killed) >= 2, killed
        assert before > 0 and after > 0, "the host died in the middle of the load"
        assert batches_stored(w2, since=w2_at_kill) > 0, "w2 stored the batches after w1 died"
    finally:
        multihost.start_worker("w1")  # back for the next faults


def reaches(host, address: str, port: int) -> bool:
    """Whether ``host`` can open a TCP connection to ``address:port`` within a second."""
    probe = f"import socket; socket.create_connection(({address!r}, {port}), timeout=1).close()"
    return subprocess.run([*host.prefix, sys.executable, "-c", probe], capture_output=True).returncode == 0


def test_a_worker_host_cut_from_the_database(multihost, loads, network):
    w1, w2 = multihost.worker("w1"), multihost.worker("w2")
    postgres = multihost.stack.postgres
    traffic = send(multihost, loads, "cut")
    traffic.wait_until(0.05)
    mid_batch = in_a_batch(multihost, w1, traffic, until=0.1)  # its transaction hangs with the link
    before = traffic.acknowledged()
    w1_at_cut, w2_at_cut = log_size(w1), log_size(w2)
    ended_before = postgres.log().count(IDLE_TIMEOUT)
    network["w1"].link("down")
    cut = time.monotonic()
    try:
        cut_off = not reaches(network["w1"], postgres.host, postgres.port)
        time.sleep(max(0.0, CUT_SECONDS - (time.monotonic() - cut)))
        # Whether w2 waits for a lock of a transaction w1 had open (ended by PostgreSQL, ingest/locks.py).
        w2_waits_for_w1 = deployment.blocked(multihost.stack, w2, w1)
    finally:
        network["w1"].link("up")
    seconds_cut = time.monotonic() - cut
    during = traffic.acknowledged() - before
    w1_at_up, w2_at_up = log_size(w1), log_size(w2)
    traffic.join()
    stored = {"w1": batches_stored(w1, w1_at_cut, w1_at_up), "w2": batches_stored(w2, w2_at_cut, w2_at_up)}
    w1_back = batches_stored(w1, w1_at_up)
    ended = postgres.log().count(IDLE_TIMEOUT) - ended_before
    finish(
        multihost,
        traffic,
        "cut",
        "(b) worker host cut off",
        f"link of host w1 down for {seconds_cut:.0f} s{', inside a batch' if mid_batch else ''}, then up; "
        f"spans acknowledged {before} before, {during} meanwhile, {traffic.acknowledged() - before - during}"
        f" after; batches stored meanwhile by w1 {stored['w1']}, by w2 "
        f"{stored['w2']} ({'waiting' if w2_waits_for_w1 else 'not waiting'} at the end for a lock w1 held); "
        f"by w1 once back {w1_back}; transactions of w1 PostgreSQL ended after "
        f"{deployment.LOCK_IDLE_SECONDS} s silent: {ended}",
    )
    assert cut_off, "w1 still reached the database host with its link down"
    # A transaction w1 had open ended LOCK_IDLE_SECONDS into the cut, releasing its locks: w2 went on.
    assert not w2_waits_for_w1, f"w2 still waits for a lock w1 took before a {CUT_SECONDS} s cut"
    assert before > 0 and during > 0 and traffic.acknowledged() > before + during, "the cut was mid-load"
    assert w1.process.alive(), "w1 survived the cut"
    if mid_batch:
        assert ended >= 1, "PostgreSQL ended the transaction w1 had open when it was cut off"


def test_the_broker_restarts(multihost, loads):
    redis = multihost.stack.redis
    traffic = send(multihost, loads, "broker")
    traffic.wait_until(0.25)
    before = traffic.acknowledged()
    redis.kill()  # SIGKILL, no persistence: every queued message is lost with it
    down = time.monotonic()
    time.sleep(BROKER_DOWN_SECONDS)
    redis.start()  # the same address, empty
    seconds_down = time.monotonic() - down
    at_restart = traffic.acknowledged()
    logs = [multihost.stack.web.log_path, multihost.grpc.log_path]
    not_enqueued = sum(path.read_text(errors="replace").count("could not enqueue batch") for path in logs)
    traffic.join()
    after = traffic.acknowledged() - at_restart
    finish(
        multihost,
        traffic,
        "broker",
        "(c) broker restarts",
        f"Redis on host db killed, started again {seconds_down:.0f} s later on the same address; "
        f"{before} spans acknowledged before, {after} after; {not_enqueued} batches not enqueued "
        "meanwhile (the sweeper's)",
    )
    assert before > 0 and after > 0, "the broker restarted mid-load"
    assert not_enqueued > 0, "the receivers acknowledged batches while the broker was down"


def test_numbering_and_analyses_equal_a_single_host_run(
    multihost, loads, network, postgres, template, allowed_hosts
):
    for name in LOADS:  # the loads a fault test did not send (this test run alone): sent without one
        if name not in multihost.sent:
            traffic = send(multihost, loads, name)
            traffic.join()
            stack.recover(multihost.stack)
    db = network["db"]
    single = deployment.deploy("single", postgres, template, db, db, {"db": db}, allowed_hosts)
    try:
        traffics = [Traffic.to(single, loads[name], 0.05).start() for name in LOADS]
        for traffic in traffics:
            traffic.join()
        drained = stack.recover(single.stack)
        for traffic in traffics:
            load = traffic.total()
            assert len(load.acked) == len(load.sent), "every export acknowledged by the single host"
        multi, alone = deployment.outcome(multihost.stack), deployment.outcome(single.stack)
    finally:
        single.stop()

    calls = sum(len(run["calls"]) for run in multi.values())
    findings = [finding for run in multi.values() for finding in run["findings"]]
    breaks = sum(1 for finding in findings if finding[1] == "cache_invalidated")
    print(
        f"multihost vs single host: {len(multi)} runs, {calls} calls, {len(findings)} findings "
        f"({breaks} cache breaks); single host drained in {drained:.1f} s"
    )
    assert calls == sum(deployment.spans_of(load) for load in loads.values())
    assert breaks > 0, "the load's cache breaks are found: the analyses have something to compare"
    # The comparison sees a difference when there is one: a call's turn changed by one.
    perturbed = copy.deepcopy(alone)
    run = perturbed[min(perturbed)]
    seq, turn, *rest = run["calls"][0]
    run["calls"][0] = (seq, turn + 1, *rest)
    assert deployment.differences(multi, perturbed), "the comparison cannot fail"
    assert not (found := deployment.differences(multi, alone)), "\n".join(found)
