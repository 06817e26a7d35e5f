"""Fault tests run on a private stack: a PostgreSQL cluster and Redis servers of their own, started and
stopped here, so they can be crashed and restarted without disturbing anyone else's database."""

import shutil

import pytest

from tests import services
from tests.faults import stack


@pytest.fixture(scope="session")
def private_postgres():
    bin_dir = stack.postgres_bin()
    if bin_dir is None:
        services.require("the PostgreSQL server binaries (initdb, pg_ctl)")
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        services.require("redis-server and redis-cli")
    cluster = stack.PrivatePostgres(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="session")
def template_database(private_postgres):
    """A migrated database every scenario copies (CREATE DATABASE … TEMPLATE is much faster)."""
    name = "ctxfault_template"
    private_postgres.execute(f"CREATE DATABASE {name}")
    env = {**stack.os.environ, "DATABASE_URL": private_postgres.url(name)}
    env.pop("CELERY_BROKER_URL", None)
    stack.manage(env, "migrate", "--noinput", "-v0")
    return name
