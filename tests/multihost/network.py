"""Hosts for the multi-host test: Linux network namespaces joined by a bridge of their own.

Each host is a namespace with loopback and one veth into the bridge, on a private /24 that no route of
this machine uses. The bridge has an address in it too (the test's processes, in the root namespace,
reach the hosts through it), but nothing routes the subnet anywhere: the namespaces have no default
route and the root namespace does not forward, so no packet of theirs leaves the machine.
"""

import contextlib
import ipaddress
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

PREFIX = "ctxmh"  # every namespace this test makes: ctxmh-<pid of the test session>-<host>
SUBNETS = ipaddress.ip_network("10.213.0.0/16")  # the /24s it chooses from
# What ``ip route`` may write before a route's destination.
ROUTE_TYPES = {"unicast", "local", "broadcast", "multicast", "anycast", "unreachable", "blackhole"}
ROUTE_TYPES |= {"prohibit", "throw", "nat"}


def ip(*args: str, check: bool = True) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(f"ip {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine routes or has an address in (the default route aside)."""
    found = []
    for line in ip("-4", "-o", "route", "show", "table", "all").splitlines():
        words = line.split()
        destination = words[1] if words[0] in ROUTE_TYPES else words[0]
        if destination != "default":
            found.append(ipaddress.ip_network(destination, strict=False))
    for line in ip("-4", "-o", "addr", "show").splitlines():
        found.append(ipaddress.ip_interface(line.split()[3]).network)
    return found


def free_subnet(seed: int) -> ipaddress.IPv4Network:
    """A /24 of SUBNETS that overlaps nothing this machine uses, starting from ``seed``'s."""
    candidates = list(SUBNETS.subnets(new_prefix=24))
    used = used_networks()
    for index in range(len(candidates)):
        subnet = candidates[(seed + index) % len(candidates)]
        if not any(subnet.overlaps(network) for network in used):
            return subnet
    raise RuntimeError(f"no free /24 in {SUBNETS}")


def remove_stale() -> None:
    """Namespaces and bridges left by a test session that died without cleaning up (its pid is gone)."""
    for name in ip("netns", "list").split():
        found = re.fullmatch(rf"{PREFIX}-(\d+)-\w+", name)
        if found and not os.path.exists(f"/proc/{found[1]}"):
            kill_all(name)
            ip("netns", "del", name, check=False)
    for line in ip("-o", "link", "show", "type", "bridge").splitlines():
        name = line.split(":")[1].strip()
        found = re.fullmatch(r"cmh([0-9a-f]+)", name)
        if found and not os.path.exists(f"/proc/{int(found[1], 16)}"):
            ip("link", "del", name, check=False)


def pids(namespace: str) -> list[int]:
    return [int(pid) for pid in ip("netns", "pids", namespace, check=False).split()]


def kill_all(namespace: str) -> list[int]:
    """SIGKILL every process in ``namespace``; returns their pids."""
    killed = pids(namespace)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


@dataclass
class Host:
    name: str
    namespace: str
    address: str
    port_link: str  # the veth's end on the bridge, in the root namespace: down cuts the host off

    @property
    def prefix(self) -> tuple[str, ...]:
        """Run a command on this host."""
        return ("ip", "netns", "exec", self.namespace)

    def pids(self) -> list[int]:
        return pids(self.namespace)

    def kill_all(self) -> list[int]:
        """Every process of the host, SIGKILL: the machine dies."""
        return kill_all(self.namespace)

    def link(self, state: str) -> None:
        ip("link", "set", self.port_link, state)


class Network:
    """A bridge and a namespace per host name, on a free /24; ``remove()`` undoes it all."""

    def __init__(self, names: list[str]) -> None:
        tag = format(os.getpid(), "x")
        self.bridge = f"cmh{tag}"  # interface names: 15 characters at most
        remove_stale()
        self.subnet = free_subnet(os.getpid())
        addresses = self.subnet.hosts()
        self.address = str(next(addresses))  # the bridge's: the root namespace's way in
        self.hosts: dict[str, Host] = {}
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            ip("addr", "add", f"{self.address}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
            for name in names:
                self.hosts[name] = self._add_host(name, str(next(addresses)), tag)
        except BaseException:
            self.remove()
            raise

    def _add_host(self, name: str, address: str, tag: str) -> Host:
        namespace = f"{PREFIX}-{os.getpid()}-{name}"
        host = Host(name, namespace, address, f"cmh{tag}-{name}")
        ip("netns", "add", namespace)
        self.hosts[name] = host  # removed with the rest from here on
        ip("link", "add", host.port_link, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        ip("link", "set", host.port_link, "master", self.bridge, "up")
        ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")
        ip("-n", namespace, "link", "set", "lo", "up")
        routes = ip("-n", namespace, "-4", "route", "show")
        assert "default" not in routes, f"{namespace} has a default route: {routes}"
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def remove(self) -> None:
        """Kill what still runs on the hosts, delete the namespaces (and their veths), then the bridge."""
        for host in self.hosts.values():
            host.kill_all()
        deadline = time.monotonic() + 10
        while any(host.pids() for host in self.hosts.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for host in self.hosts.values():
            ip("netns", "del", host.namespace, check=False)
        ip("link", "del", self.bridge, check=False)
