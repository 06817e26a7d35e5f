"""The OTLP/gRPC receiver (``manage.py serve_otlp_grpc``, a live process) under attack (issue 40): malformed
messages, messages over the size limit, gzip bombs, missing and wrong keys, hundreds of calls held open
by one client. Each attack gets its exact status and a useful message, nothing it sent is stored (in
any project), and another client's well-formed export, on a connection of its own, is answered OK and
stored within 1 s, while the attack runs and right after it.

Embedded (SQLite, tasks in the receiver) always; PostgreSQL with the real broker where configured.
"""

import gzip
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ingest.grpc_receiver import (
    LOGS_SERVICE,
    MAX_STREAMS_PER_CONNECTION,
    MISSING_KEY,
    RETRY_INFO_TRAILER,
    TRACE_SERVICE,
)
from tests import factories, services
from tests.ingest.test_grpc_receiver import MAX_MESSAGE, Embedded, bearer, details_of, manage

pytestmark = pytest.mark.timing  # asserts how long things take: make test runs it alone

TRACES = f"/{TRACE_SERVICE}/Export"
LOGS = f"/{LOGS_SERVICE}/Export"
BOUND = 1.0  # seconds: the bound on another client's answer while an attack runs
THREADS = 8  # the receiver's pool (CTXVIEW_GRPC_THREADS' default)
INVALID_KEY = "invalid or revoked ingest key"
# Every latency the bystander measured, per test: printed at the end of the module (run with -s).
LATENCIES: dict[str, list[float]] = {}


class Site(Embedded):
    """The receiver and its database; ``keys``: attacked, bystander, revoked, of a deleted project."""

    bystander_project: int = 0

    def stored_elsewhere(self) -> tuple[int, int, int]:
        """Raw batches, spans and log records of every project but the bystander's."""
        return tuple(
            self.query(f"SELECT count(*) FROM {table} WHERE project_id <> ?", (self.bystander_project,))[0][0]
            for table in ("ingest_rawbatch", "ingest_span", "ingest_logrecord")
        )

    def bystander_batches(self) -> int:
        rows = self.query(
            "SELECT count(*) FROM ingest_rawbatch WHERE project_id = ?", (self.bystander_project,)
        )
        return rows[0][0]

    def _status(self, field: str) -> int:
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith(f"{field}:")).split()[1])

    def threads(self) -> int:
        return self._status("Threads")

    def peak_memory(self) -> int:
        """The receiver's peak resident memory, in bytes."""
        return self._status("VmHWM") * 1024


class PostgresSite(Site):
    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        from django.db import connection

        with self.blocker.unblock(), connection.cursor() as cursor:
            cursor.execute(sql.replace("?", "%s"), params)
            return cursor.fetchall()


@pytest.fixture(scope="module", params=["embedded", "postgresql"])
def site(request, tmp_path_factory):
    if request.param == "embedded":
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
        env["CTXVIEW_DATA_DIR"] = str(tmp_path_factory.mktemp("grpc-attacks"))
        kind = Site
    else:
        env = dict(request.getfixturevalue("service_env"))  # skips, with the reason, when not configured
        kind = PostgresSite
    env["CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES"] = str(MAX_MESSAGE)
    env["CTXVIEW_GRPC_THREADS"] = str(THREADS)
    manage(env, "migrate", "--noinput", "-v0")
    slugs = ("attacked", "bystander", "revoked", "gone")
    keys = [manage(env, "createproject", slug).strip().splitlines()[-1] for slug in slugs]
    manage(
        env, "shell", "-c",
        "from ingest.models import IngestKey, Project; from ingest.keys import key_id; "
        f"IngestKey.objects.get(key_id=key_id({keys[2]!r})).revoke(); "
        "Project.objects.get(slug='gone').delete()",
    )  # fmt: skip
    process, port = services.start_grpc(env, f"grpc-attacks-{request.param}")
    receiver = kind(env, keys, port)
    receiver.pid = process.popen.pid
    if kind is PostgresSite:
        receiver.blocker = request.getfixturevalue("django_db_blocker")
    [(receiver.bystander_project,)] = receiver.query("SELECT id FROM ingest_project WHERE slug = 'bystander'")
    # The first requests of a fresh receiver load code and open connections (1.2 to 2.2 s measured):
    # warm it up; the quiet latency is what the bound below is compared with.
    LATENCIES[f"quiet ({request.param})"] = [Bystander(receiver).send() for _ in range(THREADS + 2)][2:]
    yield receiver
    process.stop()
    manage(env, "flush", "--noinput")
    print()
    for test, seconds in LATENCIES.items():
        print(f"bystander {test}: {len(seconds)} exports, max {max(seconds):.3f} s")
    LATENCIES.clear()


def connection(site: Site) -> grpc.Channel:
    """A channel on a connection of its own: grpcio shares one between channels to the same target."""
    return grpc.insecure_channel(site.target, options=[("grpc.use_local_subchannel_pool", 1)])


# Another client, as a process of its own (the attacking calls' work in this process would slow a thread
# here, not the receiver): an export on a connection of its own every 0.1 s, a line per answer, until
# its stdin closes.
BYSTANDER = """
import sys, threading, time, grpc
target, key, body = sys.argv[1], sys.argv[2], bytes.fromhex(sys.stdin.readline())
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
while not done.is_set():
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        started = time.monotonic()
        try:
            channel.unary_unary(sys.argv[3])(body, metadata=(("authorization", "Bearer " + key),), timeout=10)
            print(f"OK {time.monotonic() - started:.4f}", flush=True)
        except grpc.RpcError as error:
            print(f"{error.code().name} {time.monotonic() - started:.4f} {error.details()}", flush=True)
    done.wait(0.1)
"""


class Bystander:
    """Another client: a well-formed export every 0.1 s while an attack runs, and one right after."""

    def __init__(self, site: Site, name: str | None = None):
        self.site = site
        self.latencies = LATENCIES.setdefault(name, []) if name else []
        self.sent = 0

    def send(self) -> float:
        body = factories.trace_request(spans=1).SerializeToString()
        with connection(self.site) as channel:
            call = channel.unary_unary(TRACES)
            started = time.monotonic()
            try:
                call(body, metadata=bearer(self.site.keys[1]), timeout=10)
            except grpc.RpcError as error:
                raise AssertionError(f"the bystander got {error.code()}: {error.details()}") from None
            latency = time.monotonic() - started
        self.sent += 1
        self.latencies.append(latency)
        return latency

    def __enter__(self) -> "Bystander":
        self.batches = self.site.bystander_batches()
        args = [sys.executable, "-c", BYSTANDER, self.site.target, self.site.keys[1], TRACES]
        self.process = subprocess.Popen(
            args, cwd=services.ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.process.stdin.write(factories.trace_request(spans=1).SerializeToString().hex() + "\n")
        self.process.stdin.flush()
        self.first = self.process.stdout.readline()  # answered once before the attack starts
        return self

    def __exit__(self, *exc_info) -> None:
        self.process.stdin.close()
        answers = [self.first, *self.process.stdout]
        self.process.wait(timeout=30)
        if exc_info[0] is not None:
            return
        refused = [answer for answer in answers if not answer.startswith("OK ")]
        assert not refused, f"the bystander was refused: {refused}"
        self.latencies.extend(float(answer.split()[1]) for answer in answers)
        self.sent += len(answers)
        self.send()
        assert max(self.latencies) < BOUND, f"another client waited {max(self.latencies):.2f} s"
        assert self.site.bystander_batches() == self.batches + self.sent  # every answer OK was stored


def call(site: Site, body: bytes, metadata=(), method=TRACES, compression=None) -> grpc.RpcError | None:
    """One call on a connection of its own: the RpcError it ends with, or None for OK."""
    with connection(site) as channel:
        try:
            channel.unary_unary(method)(body, metadata=metadata, timeout=10, compression=compression)
        except grpc.RpcError as error:
            return error
    return None


def assert_invalid_argument(error: grpc.RpcError | None, expected: str) -> None:
    assert error is not None and error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in error.details()
    status, [bad_request] = details_of(error, error_details_pb2.BadRequest)
    assert bad_request.field_violations[0].description == status.message == error.details()


# --- 1. Malformed messages -----------------------------------------------------------------------

TRACE_BODY = factories.trace_request(spans=2).SerializeToString()
LOGS_BODY = factories.logs_request(records=2).SerializeToString()


def wrong_wire_type_in_span() -> bytes:
    """A span whose trace_id (field 1, bytes) came as a varint: protobuf keeps it as an unknown field,
    and the span has no trace id."""
    request = factories.trace_request(spans=1)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.ClearField("trace_id")
    span.MergeFromString(b"\x08\x2a")
    assert not span.trace_id
    return request.SerializeToString()


CORRUPT = "not a valid protobuf Export{}ServiceRequest"
MALFORMED = {
    "truncated-traces": (TRACES, TRACE_BODY[: len(TRACE_BODY) // 2], CORRUPT.format("Trace")),
    "truncated-logs": (LOGS, LOGS_BODY[: len(LOGS_BODY) // 2], CORRUPT.format("Logs")),
    "random-traces": (TRACES, random.Random(40).randbytes(512), CORRUPT.format("Trace")),
    "random-logs": (LOGS, random.Random(41).randbytes(512), CORRUPT.format("Logs")),
    "logs-to-traces": (TRACES, LOGS_BODY, "it parses as a logs export: is it sent to /v1/traces by mistake?"),
    "traces-to-logs": (LOGS, TRACE_BODY, "it parses as a traces export: is it sent to /v1/logs by mistake?"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_message_is_invalid_argument_stores_nothing_and_others_are_answered(site, name):
    method, body, expected = MALFORMED[name]
    before = site.stored_elsewhere()
    with Bystander(site, f"malformed {name}"):
        error = call(site, body, bearer(site.keys[0]), method)
    assert_invalid_argument(error, expected)
    assert site.stored_elsewhere() == before


def test_a_span_with_a_field_of_the_wrong_wire_type_is_rejected_in_partial_success(site):
    before = site.stored_elsewhere()
    with Bystander(site, "wrong wire type in a span"), connection(site) as channel:
        export = channel.unary_unary(TRACES)
        answer = export(wrong_wire_type_in_span(), metadata=bearer(site.keys[0]), timeout=10)
    # OTLP: a request with invalid spans is answered OK with partial_success (the client must not retry).
    partial = trace_service_pb2.ExportTraceServiceResponse.FromString(answer).partial_success
    assert partial.rejected_spans == 1
    assert partial.error_message.endswith("trace_id is 0 bytes, not 16")
    assert site.stored_elsewhere() == before


UNKNOWN_FIELDS_ONLY = {
    "wrong-wire-type-at-the-top": b"\x0d\x01\x02\x03\x04",  # field 1 as a fixed32
    "a-health-check-request": health_pb2.HealthCheckRequest(service="x" * 20).SerializeToString(),
}


@pytest.mark.parametrize("method", [TRACES, LOGS], ids=["traces", "logs"])
@pytest.mark.parametrize("name", UNKNOWN_FIELDS_ONLY)
def test_a_message_of_unknown_fields_only_is_an_empty_export_answered_ok_and_not_stored(site, name, method):
    # Protobuf keeps what it does not know as unknown fields, so these parse as an export with nothing in
    # it: OTLP answers an empty export OK (there is nothing to refuse and nothing is stored).
    body = UNKNOWN_FIELDS_ONLY[name]
    before = site.stored_elsewhere()
    with Bystander(site, f"unknown fields only: {name} to {method}"):
        assert call(site, body, bearer(site.keys[0]), method) is None
    assert site.stored_elsewhere() == before


# --- 2. and 3. Over the size limit, and gzip bombs -----------------------------------------------


def oversized(size: int) -> bytes:
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].name = "x" * size
    return request.SerializeToString()


# grpcio's own answers, before the receiver sees the call: a message is checked against the limit as
# sent, and a compressed one inflated only up to the limit (or a little over it: then its size is given).
TOO_LARGE = f"SERVER: Received message larger than max ({{size}} vs. {MAX_MESSAGE})"
BOMB = "Decompressed message larger than max"


@pytest.mark.parametrize("compression", [None, grpc.Compression.Gzip], ids=["plain", "gzip"])
@pytest.mark.parametrize("size", [MAX_MESSAGE + 1, 32 * MAX_MESSAGE], ids=["just-over", "32-times"])
def test_a_message_over_the_limit_is_resource_exhausted_without_retry_info(site, compression, size):
    body = oversized(size)
    before = site.stored_elsewhere()
    with Bystander(site, f"over the limit {size} {'gzip' if compression else 'plain'}"):
        error = call(site, body, bearer(site.keys[0]), compression=compression)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() in (TOO_LARGE.format(size=len(body)), BOMB if compression else None)
    assert RETRY_INFO_TRAILER not in dict(error.trailing_metadata() or ())  # final: not to be retried
    assert site.stored_elsewhere() == before


def test_a_gzip_bomb_is_resource_exhausted_without_inflating_it_in_memory(site):
    # 64 MiB in 64 KB of gzip: under the limit as sent, 256 times over it inflated.
    body = oversized(256 * MAX_MESSAGE)
    assert len(gzip.compress(body)) < MAX_MESSAGE
    peak_before = site.peak_memory()
    before = site.stored_elsewhere()
    with Bystander(site, "gzip bomb"):
        error = call(site, body, bearer(site.keys[0]), compression=grpc.Compression.Gzip)
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() == BOMB
    assert site.stored_elsewhere() == before
    grown = site.peak_memory() - peak_before
    print(f"gzip bomb: the receiver's peak memory grew by {grown >> 10} KiB")
    assert grown < len(body) // 2, f"the receiver's peak memory grew by {grown >> 20} MiB"


# --- 4. Keys -------------------------------------------------------------------------------------

KEYS = {
    # name: (metadata from the site's keys, the message that starts the details)
    "no-key": (lambda keys: (), MISSING_KEY),
    "x-api-key": (lambda keys: (("x-api-key", keys[0]),), MISSING_KEY),
    "authorization-without-bearer": (lambda keys: (("authorization", keys[0]),), MISSING_KEY),
    "basic-authorization": (lambda keys: (("authorization", f"Basic {keys[0]}"),), MISSING_KEY),
    "binary-metadata": (lambda keys: (("x-ctxview-key-bin", keys[0].encode()),), MISSING_KEY),
    "empty-bearer": (lambda keys: (("authorization", "Bearer "),), MISSING_KEY),
    "empty-x-ctxview-key": (lambda keys: (("x-ctxview-key", ""),), MISSING_KEY),
    "malformed": (lambda keys: bearer("cvk_"), INVALID_KEY),
    "junk": (lambda keys: bearer("not-a-key " * 100), INVALID_KEY),
    "unknown": (lambda keys: bearer(keys[0][:-4] + "AAAA"), INVALID_KEY),
    "revoked": (lambda keys: bearer(keys[2]), INVALID_KEY),
    "of-a-deleted-project": (lambda keys: (("x-ctxview-key", keys[3]),), INVALID_KEY),
}


@pytest.mark.parametrize("method", [TRACES, LOGS], ids=["traces", "logs"])
@pytest.mark.parametrize("name", KEYS)
def test_a_missing_or_wrong_key_is_unauthenticated_and_stores_nothing(site, name, method):
    metadata, expected = KEYS[name]
    before = site.stored_elsewhere()
    body = TRACE_BODY if method == TRACES else LOGS_BODY
    with Bystander(site, f"key {name}"):
        error = call(site, body, metadata(site.keys), method)
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error.details() == expected
    assert site.stored_elsewhere() == before


# --- 5. Hundreds of calls from one client --------------------------------------------------------

CALLS = 300


# What a client gets for a call over the limit of calls its connection holds open (the server's HTTP/2
# SETTINGS_MAX_CONCURRENT_STREAMS): the stream refused (REFUSED_STREAM), retryable UNAVAILABLE. grpcio's
# client opens them all and does not wait for a stream to free up.
REFUSED_STREAM = "Stream removed (RST_STREAM (Received RST_STREAM with error code 7))"
REFUSED = (grpc.StatusCode.UNAVAILABLE, REFUSED_STREAM)


def test_hundreds_of_calls_held_open_on_one_connection_hold_no_thread_and_starve_no_one(site):
    """300 calls opened on one connection whose message comes only when the test lets it (a slow
    client, or one that never finishes): each waits without a thread of the receiver's, and another
    client is answered meanwhile."""
    gate = threading.Event()

    def held_message():
        gate.wait()
        yield TRACE_BODY

    before = site.stored_elsewhere()
    threads_before = site.threads()
    with grpc.insecure_channel(site.target) as attacker:  # one channel: one connection
        stream = attacker.stream_unary(TRACES)
        # No key: once let go, each is refused, so nothing of the 300 may be stored.
        calls = [stream.future(held_message(), timeout=60) for _ in range(CALLS)]
        with Bystander(site, "300 calls held open"):
            time.sleep(3)
        threads_held = site.threads()
        gate.set()
        answers = Counter((future.exception().code(), future.exception().details()) for future in calls)
    print(f"threads of the receiver: {threads_before} quiet, {threads_held} with {CALLS} calls held")
    print(f"answers: {dict(answers)}")
    refused = answers.pop((grpc.StatusCode.UNAVAILABLE, REFUSED_STREAM), 0)
    assert answers == {(grpc.StatusCode.UNAUTHENTICATED, MISSING_KEY): CALLS - refused}
    assert CALLS - refused >= MAX_STREAMS_PER_CONNECTION
    assert site.stored_elsewhere() == before
    assert threads_held <= threads_before + 2


def test_hundreds_of_calls_that_never_send_their_message_end_at_their_deadline(site):
    def never():
        threading.Event().wait(30)
        yield TRACE_BODY

    before = site.stored_elsewhere()
    with grpc.insecure_channel(site.target) as attacker:
        stream = attacker.stream_unary(TRACES)
        calls = [stream.future(never(), metadata=bearer(site.keys[0]), timeout=2) for _ in range(CALLS)]
        with Bystander(site, "300 calls that never send"):
            answers = Counter((future.exception().code(), future.exception().details()) for future in calls)
    refused = answers.pop((grpc.StatusCode.UNAVAILABLE, REFUSED_STREAM), 0)
    assert answers == {(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"): CALLS - refused}
    assert CALLS - refused >= MAX_STREAMS_PER_CONNECTION
    assert site.stored_elsewhere() == before


def test_hundreds_of_concurrent_refused_calls_from_one_client_starve_no_one(site):
    """300 calls at once on one connection, every kind of refusal mixed: each gets its own status."""
    attacks = [
        (TRACE_BODY, (), grpc.StatusCode.UNAUTHENTICATED),
        (TRACE_BODY, bearer(site.keys[2]), grpc.StatusCode.UNAUTHENTICATED),
        (MALFORMED["random-traces"][1], bearer(site.keys[0]), grpc.StatusCode.INVALID_ARGUMENT),
        (LOGS_BODY, bearer(site.keys[0]), grpc.StatusCode.INVALID_ARGUMENT),
        (oversized(MAX_MESSAGE), bearer(site.keys[0]), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ]
    before = site.stored_elsewhere()
    with grpc.insecure_channel(site.target) as attacker:
        export = attacker.unary_unary(TRACES)
        with Bystander(site, "300 concurrent refused calls"):
            calls = [
                (export.future(body, metadata=metadata, timeout=60), expected)
                for body, metadata, expected in attacks * (CALLS // len(attacks))
            ]
            outcomes = Counter(
                (future.exception().code(), future.exception().details(), expected)
                for future, expected in calls
            )
    # A call over the connection's open-stream limit may be refused (retryable) when the calls before it
    # have not finished yet: which, and how many, depends on the machine's speed.
    refused = sum(n for (code, details, _), n in outcomes.items() if (code, details) == REFUSED)
    assert refused <= CALLS - MAX_STREAMS_PER_CONNECTION
    wrong = {
        outcome: n for outcome, n in outcomes.items() if outcome[0] != outcome[2] and outcome[:2] != REFUSED
    }
    assert wrong == {}
    assert sum(outcomes.values()) == CALLS
    assert site.stored_elsewhere() == before
