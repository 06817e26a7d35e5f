"""Failed logins counted per user and per address in Django's cache (Redis when CTXVIEW_CACHE_URL names
one, so every web process counts the same); past the limit the login page answers 429 without checking
the password at all, so guessing costs the attacker time and the server no CPU (~0.2 s per hash)."""

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's address; behind our proxy (CTXVIEW_TRUST_X_FORWARDED_FOR) the one it forwarded."""
    if settings.CTXVIEW_TRUST_X_FORWARDED_FOR:
        forwarded = request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
        if forwarded:  # the last entry is the one our proxy added; earlier ones are the client's word
            return forwarded[:64]
    return request.META.get("REMOTE_ADDR", "")


def _counters(username: str, address: str) -> list[tuple[str, int]]:
    # Hashed: a username is user input of any length and characters, a cache key is not.
    user = hashlib.sha256(username.strip().lower().encode()).hexdigest()[:32]
    return [
        (f"ctxview:login:user:{user}", settings.CTXVIEW_LOGIN_MAX_FAILURES_PER_USER),
        (f"ctxview:login:address:{hashlib.sha256(address.encode()).hexdigest()[:32]}",
         settings.CTXVIEW_LOGIN_MAX_FAILURES_PER_ADDRESS),
    ]  # fmt: skip


def wait_seconds(username: str, address: str) -> int:
    """0 while logins may be tried; else the seconds until the window of the exhausted counter ends."""
    waits = []
    for key, limit in _counters(username, address):
        if limit and (cache.get(key) or 0) >= limit:
            since = cache.get(f"{key}:since") or time.time()
            waits.append(max(1, math.ceil(since + settings.CTXVIEW_LOGIN_WINDOW_SECONDS - time.time())))
    return max(waits, default=0)


def failed(username: str, address: str) -> None:
    window = settings.CTXVIEW_LOGIN_WINDOW_SECONDS
    for key, _ in _counters(username, address):
        if cache.add(key, 0, timeout=window):  # a new window starts with this failure
            cache.set(f"{key}:since", time.time(), timeout=window)
        try:
            cache.incr(key)
        except ValueError:  # the window ended between add and incr: this failure opens the next one
            cache.add(key, 1, timeout=window)


def succeeded(username: str) -> None:
    """The user's own count starts again; the address's stays (one right password among many guesses
    does not excuse the others)."""
    key, _ = _counters(username, "")[0]
    cache.delete_many([key, f"{key}:since"])


def rate_wait(name: str, limit: int, window: int) -> int:
    """Counts one request under ``name`` (e.g. a user's replays) in a fixed window of ``window`` seconds:
    0 while it is within ``limit`` (0: no limit), else the seconds until the window ends."""
    if not limit:
        return 0
    key = f"ctxview:rate:{hashlib.sha256(name.encode()).hexdigest()[:32]}"
    if cache.add(key, 0, timeout=window):
        cache.set(f"{key}:since", time.time(), timeout=window)
    try:
        count = cache.incr(key)
    except ValueError:  # the window ended between add and incr: this request opens the next one
        cache.add(key, 1, timeout=window)
        cache.set(f"{key}:since", time.time(), timeout=window)
        return 0
    if count <= limit:
        return 0
    since = cache.get(f"{key}:since") or time.time()
    return max(1, math.ceil(since + window - time.time()))
