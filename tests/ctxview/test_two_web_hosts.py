"""Two web processes, as two hosts behind a load balancer run them: one PostgreSQL, one broker, one Redis
cache. A limit kept in the cache holds for the pair, not for each: the login throttle stops the sixth
wrong password whichever process gets it, and an ingest key's requests per second are counted once."""

import time

import pytest
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests import factories, services
from tests.ctxview.test_login_throttle import log_in

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

FAILURES = 5  # wrong passwords per user in a window
RATE = 3  # requests per second per ingest key


@pytest.fixture
def cache_url(broker_url):
    """A Redis database of its own on the broker's server (the cache the two processes share)."""
    if not broker_url.startswith("redis://"):
        services.require("a Redis broker (its server holds the shared cache)")
    server, broker_db = broker_url.rsplit("/", 1)
    import redis

    url = f"{server}/{12 if broker_db == '13' else 13}"  # never the broker's own database: it is flushed
    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture
def two_hosts(service_env, cache_url):
    env = service_env | {
        "CTXVIEW_CACHE_URL": cache_url,
        "CTXVIEW_LOGIN_MAX_FAILURES_PER_USER": str(FAILURES),
        "CTXVIEW_LOGIN_WINDOW_SECONDS": "300",
        "CTXVIEW_INGEST_RATE_LIMIT": str(RATE),
    }
    started = [services.start_web(env, name=f"web-{host}") for host in ("a", "b")]
    yield [url for _, url in started]
    for process, _ in started:
        process.stop()


def test_the_login_throttle_counts_the_failures_of_both_processes(two_hosts, alice):
    statuses = [
        log_in(two_hosts[attempt % 2], "alice", "wrong").status_code for attempt in range(FAILURES + 2)
    ]
    # Each process alone has seen 3 and 4 failures: only a shared count stops the sixth and seventh.
    assert statuses == [200] * FAILURES + [429, 429], statuses
    assert log_in(two_hosts[0], "alice", "pw-alice").status_code == 429  # the right one waits too


def burst(urls: list[str], key: str) -> tuple[list[int], set[int]]:
    """4 x RATE requests, alternating processes, as fast as one client sends them: their answers, and the
    seconds the server may have counted them in (it reads the same clock between our two readings)."""
    body = ExportTraceServiceRequest().SerializeToString()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/x-protobuf"}
    answers, seconds = [], set()
    with requests.Session() as session:
        for number in range(4 * RATE):
            before = time.time()
            response = session.post(f"{urls[number % 2]}/v1/traces", data=body, headers=headers, timeout=30)
            answers.append(response.status_code)
            seconds.update(range(int(before), int(time.time()) + 1))
    return answers, seconds


def test_an_ingest_keys_requests_per_second_are_counted_once_for_both_processes(two_hosts):
    _, key = factories.project_with_key("two-hosts")
    # A burst over more than two seconds (a very busy machine) would let per-process counts through too.
    for _ in range(3):
        answers, seconds = burst(two_hosts, key)
        if len(seconds) <= 2:
            break
    else:
        pytest.fail(f"three bursts of {4 * RATE} requests each took more than two seconds: {sorted(seconds)}")
    assert set(answers) <= {200, 503}, answers
    # Counted once: at most RATE a second in all. Counted per process it would be up to twice that.
    assert 0 < answers.count(200) <= RATE * len(seconds), (answers, sorted(seconds))
