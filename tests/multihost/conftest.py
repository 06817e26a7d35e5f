"""The multi-host test's hosts (network namespaces on a bridge of their own) and ctxview deployed over
them, made once for the module and removed after it, whatever happened: the processes killed, the
namespaces and the bridge deleted."""

import os
import shutil

import pytest

from tests import services
from tests.faults import stack
from tests.multihost import deployment
from tests.multihost.network import Network

HOSTS = ["db", "ingest", "w1", "w2"]


def require_what_it_needs() -> None:
    if os.geteuid() != 0:
        services.require("root (the multi-host test makes network namespaces and a bridge)")
    if shutil.which("ip") is None:
        services.require("iproute2's ip (network namespaces)")
    if shutil.which("nginx") is None and not os.path.exists("/usr/sbin/nginx"):
        services.require("nginx (apt-get install nginx; .ci/run does)")
    if stack.postgres_bin() is None:
        services.require("the PostgreSQL server binaries (initdb, pg_ctl)")
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        services.require("redis-server and redis-cli")


@pytest.fixture(scope="module")
def network():
    require_what_it_needs()
    hosts = Network(HOSTS)
    try:
        yield hosts
    finally:
        hosts.remove()


@pytest.fixture(scope="module")
def postgres(network):
    cluster = deployment.start_postgres(stack.postgres_bin(), network["db"], str(network.subnet))
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture(scope="module")
def template(postgres, network):
    return deployment.migrated_template(postgres, network["db"])


@pytest.fixture(scope="module")
def allowed_hosts(network) -> list[str]:
    return [host.address for host in network.hosts.values()]


@pytest.fixture(scope="module")
def multihost(network, postgres, template, allowed_hosts):
    """ctxview over four hosts: PostgreSQL and Redis on db; nginx, gunicorn and the gRPC receiver on
    ingest; a Celery worker on each of w1 and w2."""
    workers = {name: network[name] for name in ("w1", "w2")}
    deployed = deployment.deploy(
        "multi", postgres, template, network["db"], network["ingest"], workers, allowed_hosts
    )
    try:
        yield deployed
    finally:
        deployed.stop()
