"""Requests per second per ingest key, counted in Django's cache (Redis when CTXVIEW_CACHE_URL names one,
so every web process shares the count)."""

import time

from django.conf import settings
from django.core.cache import cache


def allow(key_id: str) -> bool:
    """True while this key has made no more than CTXVIEW_INGEST_RATE_LIMIT requests this second."""
    limit = settings.CTXVIEW_INGEST_RATE_LIMIT
    if not limit:
        return True
    bucket = f"ctxview:rate:{key_id}:{int(time.time())}"
    cache.add(bucket, 0, timeout=2)
    try:
        return cache.incr(bucket) <= limit
    except ValueError:  # the bucket expired between add and incr: a new second has begun
        return True
