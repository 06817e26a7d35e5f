"""The attack: 200 wrong passwords against one user on the live server, each checked (~0.2 s of CPU for
the hash), no lockout. Now: the first few are checked, the rest get a 429 saying how long to wait, without
a password hash; a user's right password works again once the window has passed; one address trying many
users is stopped too."""

import time

import pytest
import requests
from django.core.cache import cache
from django.test import RequestFactory

from ctxview import throttle

pytestmark = pytest.mark.django_db(transaction=True)

ATTEMPTS = 200


@pytest.fixture
def throttled(settings, alice):
    settings.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER = 5
    settings.CTXVIEW_LOGIN_MAX_FAILURES_PER_ADDRESS = 10
    # The whole attack falls in one window even on a busy 2-core machine (a checked password takes up to
    # ~1 s there); the test of the window's end sets a short one.
    settings.CTXVIEW_LOGIN_WINDOW_SECONDS = 300
    cache.clear()
    yield settings
    cache.clear()


def log_in(url: str, username: str, password: str, session: requests.Session | None = None):
    session = session or requests.Session()
    if "csrftoken" not in session.cookies:
        session.get(f"{url}/login/", timeout=10)
    return session.post(
        f"{url}/login/",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        allow_redirects=False,
        timeout=30,
    )


def test_wrong_passwords_are_throttled_per_user(live_server, throttled):
    session = requests.Session()
    statuses, started = [], time.perf_counter()
    refused_times = []
    for attempt in range(ATTEMPTS):
        before = time.perf_counter()
        response = log_in(live_server.url, "alice", f"guess-{attempt}", session)
        statuses.append(response.status_code)
        if response.status_code == 429:
            refused_times.append(time.perf_counter() - before)
            assert "Too many failed logins" in response.text and "try again in 5 minutes" in response.text
            retry_after = int(response.headers["Retry-After"])
            assert 1 <= retry_after <= throttled.CTXVIEW_LOGIN_WINDOW_SECONDS
    elapsed = time.perf_counter() - started
    checked = statuses.count(200)
    assert checked == throttled.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER
    assert statuses.count(429) == ATTEMPTS - checked
    refused_times.sort()
    print(
        f"{ATTEMPTS} wrong passwords in {elapsed:.2f} s: {checked} checked, {statuses.count(429)} refused "
        f"(429, median {refused_times[len(refused_times) // 2] * 1000:.1f} ms)"
    )
    # The right password is refused too while the user is locked: else the lock would tell guesses apart.
    assert log_in(live_server.url, "alice", "pw-alice").status_code == 429


def test_the_right_password_works_once_the_window_has_passed(live_server, throttled):
    throttled.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER = 2
    throttled.CTXVIEW_LOGIN_WINDOW_SECONDS = 8
    assert [log_in(live_server.url, "alice", "wrong").status_code for _ in range(2)] == [200, 200]
    locked = log_in(live_server.url, "alice", "pw-alice")
    assert locked.status_code == 429
    time.sleep(int(locked.headers["Retry-After"]) + 1)
    response = log_in(live_server.url, "alice", "pw-alice")
    assert response.status_code == 302 and response.headers["Location"] == "/"


def test_one_address_trying_many_users_is_throttled(live_server, throttled):
    statuses = [log_in(live_server.url, f"user{number}", "guess").status_code for number in range(15)]
    limit = throttled.CTXVIEW_LOGIN_MAX_FAILURES_PER_ADDRESS
    assert statuses == [200] * limit + [429] * (15 - limit)
    # A real user on that address waits like everyone else there.
    assert log_in(live_server.url, "alice", "pw-alice").status_code == 429


def test_a_success_resets_the_users_count(live_server, throttled):
    for _ in range(throttled.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER - 1):
        assert log_in(live_server.url, "alice", "wrong").status_code == 200
    assert log_in(live_server.url, "alice", "pw-alice").status_code == 302
    for _ in range(throttled.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER):
        assert log_in(live_server.url, "alice", "wrong").status_code == 200
    assert log_in(live_server.url, "alice", "wrong").status_code == 429


@pytest.mark.parametrize(
    "trusted, forwarded, expected",
    [
        (False, "203.0.113.9", "127.0.0.1"),  # not behind our proxy: the header is the client's word
        (True, "203.0.113.9", "203.0.113.9"),
        (True, "198.51.100.1, 203.0.113.9", "203.0.113.9"),  # the entry our proxy added is the last
        (True, "", "127.0.0.1"),
    ],
)
def test_the_address_counted_is_the_one_our_proxy_saw(settings, trusted, forwarded, expected):
    settings.CTXVIEW_TRUST_X_FORWARDED_FOR = trusted
    request = RequestFactory().post("/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert throttle.client_address(request) == expected
