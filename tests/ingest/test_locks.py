"""locks.begin: a transaction that takes the write side's locks bounds how long a silent client holds them,
between statements and inside one, for that transaction only."""

import pytest
from django.db import connection, transaction
from django.test import override_settings

from ingest import locks
from tests import services

pytestmark = pytest.mark.django_db(transaction=True)  # a real transaction, whose end resets them

BOUNDS = ("idle_in_transaction_session_timeout", "tcp_keepalives_idle", "tcp_user_timeout")


def settings_now() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [list(BOUNDS)])
        return dict(cursor.fetchall())


@override_settings(CTXVIEW_LOCK_IDLE_SECONDS=5)
def test_begin_bounds_a_silent_client_for_its_transaction_only():
    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (the bounds are its settings)")
    outside = settings_now()
    with transaction.atomic():
        locks.begin()
        inside = settings_now()
    # Milliseconds, seconds and milliseconds; a Unix socket reports 0 for the TCP ones (the tests use TCP).
    assert inside == {"idle_in_transaction_session_timeout": "5000", "tcp_keepalives_idle": "5",
                      "tcp_user_timeout": "5000"}  # fmt: skip
    assert settings_now() == outside != inside
