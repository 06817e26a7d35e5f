"""Faults during a load, with real parts: the broker goes down, a worker is killed in the middle of a
batch, PostgreSQL restarts, a batch's processing fails half-way. After recovery (the sweeper), every span
that was acknowledged (a 200 to the real OTLPSpanExporter) is stored exactly once and every call is
analysed, counted from the database.

Each scenario has its own database in a private PostgreSQL cluster, its own Redis, gunicorn and two
Celery workers. CTXVIEW_FAULT_SCALE multiplies the load (default: 4 clients x 12 exports x 25 spans).
"""

import contextlib
import os
import re
import signal
import time

import psycopg
import pytest

from tests import summary
from tests.faults import stack

pytestmark = pytest.mark.services

SCALE = float(os.environ.get("CTXVIEW_FAULT_SCALE", "1"))
CLIENTS = 4
EXPORTS_PER_CLIENT = max(4, int(12 * SCALE))
SPANS_PER_EXPORT = 25
# Seconds between one client's exports: a load lasts about EXPORTS_PER_CLIENT x INTERVAL seconds, long
# enough for a fault to land in its middle (each test waits for a share of the load, not for a time).
INTERVAL = 0.4


def new_load(
    scenario: stack.Stack, seed: int, exports: int = EXPORTS_PER_CLIENT, interval: float = INTERVAL
) -> stack.Load:
    batches = [
        stack.make_batches(exports, SPANS_PER_EXPORT, conversations=3, seed=seed * 100 + client)
        for client in range(CLIENTS)
    ]
    return stack.Load(scenario.url, scenario.key, batches, interval)


def finish(scenario: stack.Stack, load: stack.Load, name: str, fault: str) -> stack.Tally:
    """Wait for the load, recover with the sweeper, count, and check nothing acknowledged was lost."""
    load.join()
    answers = ", ".join(f"{count} x {status}" for status, count in sorted(load.answers.items()))
    if "HTTP answers" not in fault:
        fault += f"; HTTP answers: {answers}"
    result = stack.tally(scenario, load, name, fault, stack.recover(scenario))
    summary.FAULT_ROWS.append(result.row())  # the table at the end of the session
    print("\n" + stack.format_table([result.row()]))
    assert result.acknowledged > 0
    assert (result.lost, result.duplicated) == (0, 0), "every acknowledged span stored exactly once"
    assert result.calls_missing == 0, "a call for every acknowledged span"
    assert (result.runs_not_analysed, result.runs_misnumbered) == (0, 0), "every call numbered and analysed"
    assert result.batches_failed == 0
    return result


@pytest.fixture
def start(private_postgres, template_database):
    started = []

    def start(name: str, workers=(("w1", "solo"), ("w2", "solo")), worker_env=None) -> stack.Stack:
        for log in stack.services.ARTIFACTS.glob(f"faults-{name}-*.log"):
            log.unlink()
        scenario = stack.start_stack(private_postgres, template_database, name, list(workers), worker_env)
        started.append(scenario)
        return scenario

    yield start
    for scenario in started:
        scenario.stop()


def test_the_broker_goes_down_during_a_load(start):
    scenario = start("broker")
    load = new_load(scenario, 1).start()
    load.wait_until(0.3)
    scenario.redis.kill()  # SIGKILL, no persistence: every queued message is lost too
    down = time.monotonic()
    load.wait_until(0.6)
    time.sleep(max(0.0, 3 - (time.monotonic() - down)))
    seconds_down = time.monotonic() - down
    scenario.redis.start()  # the same port, empty
    web_log = scenario.web.log_path.read_text(errors="replace")
    not_enqueued = web_log.count("could not enqueue batch")
    result = finish(
        scenario,
        load,
        "broker down",
        f"Redis killed for {seconds_down:.0f} s; {not_enqueued} batches not enqueued",
    )
    assert not_enqueued > 0, "the receiver acknowledged batches while the broker was down"
    answers = dict(load.answers)
    assert result.acknowledged == len(load.sent), f"the receiver needs no broker to acknowledge ({answers})"


SPAN_INSERTS_IN_FLIGHT = """
SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
WHERE a.application_name = %s AND l.relation = 'ingest_span'::regclass AND l.mode = 'RowExclusiveLock'
"""


def batch_in_flight(scenario: stack.Stack, worker: stack.Worker, timeout: float = 60) -> bool:
    """Wait until ``worker`` is inside a batch's transaction, its spans inserted but not committed."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(scenario.postgres.url(scenario.database), autocommit=True) as connection:
        while time.monotonic() < deadline:
            if connection.execute(SPAN_INSERTS_IN_FLIGHT, (worker.name,)).fetchall():
                return True
            time.sleep(0.005)
    return False


def unfinished_tasks(log: str) -> list[str]:
    """Ids of batch tasks a worker log shows received and neither succeeded nor retried."""
    received = re.findall(r"Task ingest\.tasks\.process_batch_task\[([0-9a-f-]+)\] received", log)
    ended = set(
        re.findall(r"Task ingest\.tasks\.process_batch_task\[([0-9a-f-]+)\] (?:succeeded|retry)", log)
    )
    return [task for task in received if task not in ended]


def test_a_worker_is_killed_in_the_middle_of_a_batch(start):
    # w1 runs tasks in its own process (killed whole, then started again: its message waits in Redis's
    # unacked set for the visibility timeout, so the sweeper brings the batch back); w2 is a prefork
    # worker whose pool process is killed (the parent rejects the message, which is delivered again).
    scenario = start("kill", workers=(("w1", "solo"), ("w2", "prefork")))
    # Slower: a killed worker takes a second or two to start again, and the load must outlast a few kills.
    load = new_load(scenario, 2, interval=0.7).start()
    solo_kills = pool_kills = 0
    while load.progress() < 0.8 and solo_kills + pool_kills < 6:
        solo, pool = scenario.workers
        if batch_in_flight(scenario, solo, timeout=5):
            log_before = solo.process.log_path.read_text(errors="replace")
            solo.kill()
            assert unfinished_tasks(log_before), "the worker was killed inside a batch task"
            solo_kills += 1
            scenario.workers[0] = stack.Worker(scenario.env, solo.name, "solo")
        if batch_in_flight(scenario, pool, timeout=5):
            for child in pool.pool_children():  # one: concurrency 1
                os.kill(child, signal.SIGKILL)
                pool_kills += 1

    def lost_workers() -> int:
        return pool.process.log_path.read_text(errors="replace").count("raised error: WorkerLostError")

    with contextlib.suppress(AssertionError):  # the parent logs it a moment after the kill
        stack.services.wait_for(lambda: lost_workers() >= pool_kills, 10, "the WorkerLostError log lines")
    result = finish(
        scenario,
        load,
        "worker killed mid-batch",
        f"SIGKILL inside a batch's transaction: {solo_kills} whole workers, {pool_kills} pool processes "
        f"({lost_workers()} WorkerLostError)",
    )
    assert solo_kills >= 1 and pool_kills >= 1
    assert result.acknowledged == len(load.sent)


def test_postgresql_restarts_during_a_load(start, private_postgres):
    scenario = start("pgrestart")
    load = new_load(scenario, 3, exports=3 * EXPORTS_PER_CLIENT).start()  # it goes on after the restart
    load.wait_until(0.25)
    private_postgres.stop("immediate")  # a crash: no shutdown checkpoint, recovery from the WAL
    down = time.monotonic()
    time.sleep(3)
    private_postgres.start()
    seconds_down = time.monotonic() - down
    acked_before = len(load.acked)
    load.join()
    answers = ", ".join(f"{count} x {status}" for status, count in sorted(load.answers.items()))
    logs = "".join(worker.process.log_path.read_text(errors="replace") for worker in scenario.workers)
    retries = len(re.findall(r"\] retry: Retry in .*OperationalError", logs))
    finish(
        scenario,
        load,
        "PostgreSQL restart",
        f"pg_ctl stop -m immediate, up again {seconds_down:.0f} s later; HTTP answers: {answers}; "
        f"{retries} task retries",
    )
    assert len(load.acked) > acked_before, "exports are acknowledged again once PostgreSQL is back"


def test_a_batch_fails_half_way(start):
    # The test holds a lock on the runs table; the workers' lock_timeout makes a batch's transaction fail
    # after its spans are inserted, when it adds the batch's runs. The task retries (OperationalError);
    # the rest is the sweeper's.
    scenario = start("halfway", worker_env={"PGOPTIONS": "-c lock_timeout=1000"})
    load = new_load(scenario, 4).start()
    load.wait_until(0.25)
    with psycopg.connect(scenario.postgres.url(scenario.database)) as connection:
        connection.execute("LOCK TABLE ingest_run IN SHARE ROW EXCLUSIVE MODE")
        time.sleep(4)
        connection.rollback()
    logs = "".join(worker.process.log_path.read_text(errors="replace") for worker in scenario.workers)
    half_way = len(
        re.findall(
            # A batch (its spans already inserted) or an analysis fails on the locked runs table, whichever
            # the lock catches first; both must be retried without loss or duplicates.
            r"(?:process_batch|analyse_run)_task\[[0-9a-f-]+\] retry: .*lock timeout.*ingest_run",
            logs,
        )
    )
    finish(
        scenario,
        load,
        "batch fails half-way",
        f"runs table locked 4 s: {half_way} task transactions failed half-way (lock timeout), retried",
    )
    assert half_way > 0
