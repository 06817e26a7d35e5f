"""PgBouncer in transaction pooling between ctxview and PostgreSQL, as the README's "Scaling out" says
works: the receiver (gunicorn) and two Celery workers connect through a pgbouncer of the test's own whose
pool has POOL_SIZE server connections, fewer than its clients, so a client's consecutive transactions
may each run on another server connection, and each server connection serves many clients. The load
(the real OTLPSpanExporter) has runs that cross batches, so batches of one run are stored at the same time
by both workers: the COPY staging tables, the advisory locks and the in-line analysis run concurrently
through the pool, while API clients read the runs.

The same load, sent at the same time to a second stack connected to PostgreSQL directly, is the
reference: every run's calls, their numbering and the analyses' findings must be the same.
"""

import threading
import time
from collections import Counter

import pytest
import requests

from tests import summary
from tests.faults import stack

pytestmark = pytest.mark.services

POOL_SIZE = 3  # server connections per database: fewer than the stack's clients
CLIENTS = 4
EXPORTS_PER_CLIENT = 8
SPANS_PER_EXPORT = 25
CONVERSATIONS = 3  # runs per client, each in every one of its exports: runs cross batches
INTERVAL = 0.3
READERS = 2  # API clients reading runs meanwhile


@pytest.fixture
def pgbouncer(private_postgres):
    binary = stack.pgbouncer_bin()
    if binary is None:
        stack.services.require("pgbouncer (not on PATH nor in /usr/sbin: Debian's pgbouncer package)")
    stack.services.artifact("faults-pgbouncer.log").unlink(missing_ok=True)
    bouncer = stack.PgBouncer(binary, private_postgres, pool_mode="transaction", pool_size=POOL_SIZE)
    yield bouncer
    bouncer.stop()


@pytest.fixture
def stacks(private_postgres, template_database, pgbouncer):
    started = []

    def start(name: str, workers, through=None) -> stack.Stack:
        for log in stack.services.ARTIFACTS.glob(f"faults-{name}-*.log"):
            log.unlink()
        scenario = stack.start_stack(
            private_postgres, template_database, name, list(workers), worker_env=None, through=through
        )
        started.append(scenario)
        return scenario

    yield start
    for scenario in started:
        scenario.stop()


class PoolWatch:
    """Samples pgbouncer's SHOW POOLS and SHOW SERVERS for a database while the load runs: the most
    client and server connections seen at once, and the clients each server session was seen serving."""

    def __init__(self, bouncer: stack.PgBouncer, database: str) -> None:
        self.bouncer, self.database = bouncer, database
        self.clients = self.servers = self.waiting = 0
        self.served: dict[int, set[str]] = {}  # server backend pid -> the client connections it served
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.done.wait(0.1):
            for pool in self.bouncer.show("POOLS"):
                if pool["database"] == self.database:
                    self.clients = max(self.clients, pool["cl_active"] + pool["cl_waiting"])
                    self.waiting = max(self.waiting, pool["cl_waiting"])
                    servers = sum(pool[name] for name in pool if name.startswith("sv_"))
                    self.servers = max(self.servers, servers)
            for server in self.bouncer.show("SERVERS"):
                if server["database"] == self.database and server["link"]:
                    self.served.setdefault(server["remote_pid"], set()).add(server["link"])

    def __enter__(self) -> "PoolWatch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


class Readers:
    """Threads reading runs through the API while the load is stored: an item's lifecycle reads the run's
    calls with ``QuerySet.iterator()`` outside a transaction (a server-side cursor, fetched a chunk at a
    time, each fetch a transaction of its own unless Django is told not to use them)."""

    def __init__(self, scenario: stack.Stack, threads: int) -> None:
        self.scenario = scenario
        self.answers: Counter = Counter()
        self.errors: list[str] = []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._read, daemon=True) for _ in range(threads)]

    def _read(self) -> None:
        headers = {"Authorization": f"Bearer {self.scenario.key}"}
        with requests.Session() as session:
            while not self.done.is_set():
                for (run_id,) in self.scenario.query("SELECT id FROM ingest_run ORDER BY id"):
                    url = f"{self.scenario.url}/api/v1/runs/{run_id}/items/no-such-item"
                    response = session.get(url, headers=headers, timeout=30)
                    self.answers[response.status_code] += 1
                    if response.status_code != 404:  # the run read to its end, and no such item in it
                        self.errors.append(f"{response.status_code}: {response.text[:200]}")
                time.sleep(0.2)

    def __enter__(self) -> "Readers":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        for thread in self.threads:
            thread.join()


def outcome(scenario: stack.Stack) -> tuple[dict, list]:
    """Each run's calls (span ids in the order of their numbers, the numbers, how far analysed), and
    every finding (run, call number, type, cause, item) in a stable order."""
    runs = {
        key: (span_ids, seqs, analysed)
        for key, span_ids, seqs, analysed in scenario.query(
            "SELECT r.key, array_agg(c.span_id ORDER BY c.seq), array_agg(c.seq ORDER BY c.seq),"
            " r.analysed_seq FROM ingest_run r JOIN ingest_call c ON c.run_id = r.id GROUP BY r.id"
        )
    }
    findings = sorted(
        scenario.query(
            "SELECT r.key, coalesce(f.call_seq, 0), f.type, f.cause, f.item_id"
            " FROM ingest_finding f JOIN ingest_run r ON r.id = f.run_id"
        )
    )
    return runs, findings


def log_lines(workers: list[stack.Worker], *patterns: str) -> list[str]:
    """The lines of the workers' logs that hold every one of ``patterns``."""
    logs = "".join(worker.process.log_path.read_text(errors="replace") for worker in workers)
    return [line for line in logs.splitlines() if all(pattern in line for pattern in patterns)]


def test_transaction_pooling_stores_the_load_as_postgresql_does(pgbouncer, stacks):
    started = time.monotonic()
    batches = [
        stack.make_batches(EXPORTS_PER_CLIENT, SPANS_PER_EXPORT, CONVERSATIONS, 3800 + client, cache=True)
        for client in range(CLIENTS)
    ]
    pooled = stacks("pgbouncer", [("w1", "solo"), ("w2", "solo")], through=pgbouncer)
    direct = stacks("pgbdirect", [("w1", "solo")])
    loads = {
        scenario.name: stack.Load(scenario.url, scenario.key, batches, INTERVAL)
        for scenario in (pooled, direct)
    }
    with PoolWatch(pgbouncer, pooled.database) as pool, Readers(pooled, threads=READERS) as readers:
        for load in loads.values():
            load.start()
        for load in loads.values():
            load.join(timeout=120)
        loaded = time.monotonic()
        for scenario in (pooled, direct):  # no sweeper: the workers alone must get there
            stack.services.wait_for(
                lambda s=scenario: stack.settled(s), 60, f"{scenario.name} to settle", 0.3
            )
        settling = time.monotonic() - loaded

    how = {pooled.name: f"through pgbouncer ({POOL_SIZE} servers)", direct.name: "PostgreSQL directly"}
    tallies = {
        scenario.name: stack.tally(
            scenario, loads[scenario.name], scenario.name, how[scenario.name], settling
        )
        for scenario in (pooled, direct)
    }
    result = tallies["pgbouncer"]
    summary.FAULT_ROWS.append(result.row())
    stats = next(row for row in pgbouncer.show("STATS") if row["database"] == pooled.database)
    client_names = Counter(row["application_name"] for row in pgbouncer.show("CLIENTS"))
    print("\n" + stack.format_table([tally.row() for tally in tallies.values()]))
    served = sorted(len(clients) for clients in pool.served.values())
    print(
        f"pgbouncer: up to {pool.clients} client connections on {pool.servers} server connections "
        f"(up to {pool.waiting} clients waiting for one; server sessions seen serving {served} clients); "
        f"{stats['total_xact_count']} transactions, {stats['total_query_count']} queries; "
        f"API reads: {dict(readers.answers)}; clients at the end: {dict(client_names)}; "
        f"{time.monotonic() - started:.0f} s in all"
    )

    # Stored exactly once, numbered without gaps, analysed: counted as the fault tests count.
    spans = CLIENTS * EXPORTS_PER_CLIENT * SPANS_PER_EXPORT
    for tally in tallies.values():
        assert tally.acknowledged == spans, f"{tally.scenario}: every export acknowledged"
        assert (tally.lost, tally.duplicated, tally.stored_unacknowledged) == (0, 0, 0), tally
        assert tally.calls_missing == 0, tally
        assert (tally.runs_not_analysed, tally.runs_misnumbered, tally.batches_failed) == (0, 0, 0), tally
        assert tally.runs == CLIENTS * CONVERSATIONS, tally
    failed = log_lines(pooled.workers, "raised unexpected") + log_lines(pooled.workers, "] retry: ")
    assert not failed, "a task failed or was retried behind pgbouncer:\n" + "\n".join(failed[:5])

    # The same as PostgreSQL alone, and as the load's generator made it: each conversation a run, its
    # calls numbered 1..N in the order they were made.
    pooled_runs, pooled_findings = outcome(pooled)
    direct_runs, direct_findings = outcome(direct)
    found = Counter(finding[2] for finding in pooled_findings)
    print(f"findings: {dict(found)}")
    assert found["cache_invalidated"] > 0, "the load's cache breaks are found"
    assert pooled_runs == direct_runs
    assert pooled_findings == direct_findings
    made: dict[str, list[str]] = {}
    for client in batches:
        for export in client:
            for span in export:
                conversation = span.attributes["gen_ai.conversation.id"]
                made.setdefault(conversation, []).append(stack.span_key(span)[1])
    assert {key: span_ids for key, (span_ids, _, _) in pooled_runs.items()} == made
    for span_ids, seqs, analysed in pooled_runs.values():
        assert seqs == list(range(1, len(span_ids) + 1)) and analysed == len(span_ids)
    # Reading a run meanwhile (a server-side cursor without CTXVIEW_PGBOUNCER: "cursor does not exist").
    assert readers.answers[404] > 0, dict(readers.answers)
    failed_reads = readers.errors
    assert not failed_reads, f"{len(failed_reads)} reads failed ({pooled.web.log_path}): {failed_reads[0]}"

    # Through pgbouncer, really pooled: more clients than server connections, both workers among them.
    assert pool.clients > POOL_SIZE >= pool.servers > 0, (pool.clients, pool.servers)
    assert stats["total_xact_count"] >= CLIENTS * EXPORTS_PER_CLIENT
    assert {worker.name for worker in pooled.workers} <= set(client_names), client_names
    assert max(served, default=0) > 1, "no server connection was seen serving two clients"
    # The COPY staging tables are per server session: both workers' batches went through at most
    # POOL_SIZE of them.
    staging = pooled.query(
        "SELECT count(*) FROM pg_class WHERE relpersistence = 't' AND relname LIKE 'ingest_span_staging%%'"
    )[0][0]
    stored_by = [len(log_lines([worker], "process_batch_task[", "succeeded")) for worker in pooled.workers]
    assert 0 < staging <= POOL_SIZE and all(stored_by), (staging, stored_by)
    backends = pooled.query(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )[0][0]
    assert backends <= POOL_SIZE, f"{backends} server sessions on the database: some bypass pgbouncer"
