"""Every request the server makes for a user goes through here (re-ask today).

A URL a user typed must not become a way into the machine's own network: the host is resolved once,
every address it gives is checked (loopback, link-local, private, shared, multicast, reserved and
unspecified addresses are refused in every spelling, IPv4-in-IPv6 included), and the connection goes to
the address that was checked, so a second resolution cannot point it elsewhere. Only what the operator
names in ``CTXVIEW_OUTBOUND_ALLOW`` (host names or CIDR networks) passes otherwise.

Redirects are never followed (a credential must not travel to a host nobody set). One call has a total
deadline that holds against a server trickling its answer (a watchdog closes the socket at the
deadline), a body limit, and a place among a few per process; a job of several calls holds its
project's lease, so one project runs one such job at a time across the instance and the web tier's
threads stay free for pages.
"""

import http.client
import ipaddress
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache

# Names that mean "this machine" or "this network" wherever they are used (RFC 6761, RFC 8375, and the
# cloud metadata services' names), refused before any resolution.
LOCAL_NAMES = ("localhost", "metadata", "instance-data")
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".localdomain", ".lan", ".intranet")
# IPv6 prefixes that carry an IPv4 address: the IPv4 address decides.
NAT64 = ipaddress.ip_network("64:ff9b::/96")
ERROR_DETAIL_BYTES = 300


class OutboundRefused(ValueError):
    """A URL or an answer the server will not use; the message says why, for the person who set it."""


class Busy(OutboundRefused):
    """No place for another outbound call right now; trying again later may work."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # with the query


def _allowed() -> tuple[frozenset[str], tuple]:
    return _parse_allowed(tuple(settings.CTXVIEW_OUTBOUND_ALLOW))


@lru_cache(maxsize=4)
def _parse_allowed(entries: tuple[str, ...]) -> tuple[frozenset[str], tuple]:
    names, networks = set(), []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return frozenset(names), tuple(networks)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address.sixtofour:
        return address.sixtofour
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.teredo:
        return address.teredo[1]
    return None


def why_refused(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why the server will not connect to ``address`` (None: it may), the operator's allow-list aside."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            return why_refused(inner)
        if address.scope_id:
            return "a scoped (link-local) address"
    for kind in ("loopback", "unspecified", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{kind}"):
            return f"a {kind.replace('_', '-')} address"
    if not address.is_global:
        return "not a public address"
    return None


def _address_allowed(address) -> bool:
    _, networks = _allowed()
    return any(address.version == network.version and address in network for network in networks)


def target_of(url: str) -> Target:
    """The parts of an http(s) URL the server may call; OutboundRefused when it is malformed."""
    if not isinstance(url, str) or any(c.isspace() or not c.isprintable() for c in url):
        raise OutboundRefused("the URL must be an http(s) URL without spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OutboundRefused("the URL must be an http(s) URL with a host")
    if parts.username is not None or parts.password is not None:
        raise OutboundRefused("the URL must not hold a user name or password: the key is given apart")
    try:
        port = parts.port
    except ValueError:
        raise OutboundRefused("the URL's port is not a number from 1 to 65535") from None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    if port == 0:
        raise OutboundRefused("the URL's port is not a number from 1 to 65535")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(parts.scheme, parts.hostname.lower().rstrip("."), port, path)


def _literal(host: str):
    """The address a host spells, in any form the resolver takes (``127.1``, ``0x7f000001``,
    ``2130706433``, ``[::ffff:7f00:1]``), or None for a name."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return None
    return ipaddress.ip_address(found[0][4][0].split("%")[0]) if found else None


def _resolve(host: str, port: int, seconds: float) -> list:
    """getaddrinfo within ``seconds``: the resolver's own timeouts may be far longer than a deadline.
    A lookup past it is left to finish in its daemon thread, its answer unused."""
    answer: list = []

    def lookup():
        try:
            answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            answer.append(exc)

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(max(0.0, seconds))
    if not answer:
        raise OutboundRefused(f"out of time: {host} was not resolved by the deadline")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def addresses(target: Target, unresolved_ok: bool = False, seconds: float = 10) -> list[str]:
    """The addresses the server may connect to for ``target``, all checked; OutboundRefused names the
    first that is not allowed. ``unresolved_ok``: a name that does not resolve here passes with no
    address (a form saved for a name that resolves only where the server will run; the call checks
    again). The name is resolved within ``seconds``."""
    names, _ = _allowed()
    host = target.host
    by_name = host in names
    if not by_name and (host in LOCAL_NAMES or host.endswith(LOCAL_SUFFIXES)):
        raise OutboundRefused(f"{host} names a local or internal host: {_ALLOW_HINT}")
    literal = _literal(host)
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = _resolve(host, target.port, seconds)
        except (OSError, UnicodeError) as exc:
            if unresolved_ok:
                return []
            raise OutboundRefused(f"{host} could not be resolved ({getattr(exc, 'strerror', exc)})") from None
        found = []
        for info in infos:
            address = ipaddress.ip_address(info[4][0].split("%")[0])
            if address not in found:
                found.append(address)
    for address in () if by_name else found:
        reason = why_refused(address)
        if reason and not _address_allowed(address):
            spelled = host if str(address) == host else f"{host} ({address})"
            raise OutboundRefused(f"{spelled} is {reason}: {_ALLOW_HINT}")
    return [str(address) for address in found]


_ALLOW_HINT = (
    "the server calls out only to public addresses (an operator may allow a host or network with "
    "CTXVIEW_OUTBOUND_ALLOW)"
)


def check_url(url: str) -> Target:
    """``url`` checked, as it is saved, as a place the server may call (see ``addresses``)."""
    target = target_of(url)
    addresses(target, unresolved_ok=True)
    return target


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the address that was checked, whatever the name resolves to by now."""

    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = self.raw_sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def connect(self) -> None:
        self.raw_sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(self.raw_sock, server_hostname=self.host)


def _cut(connection: http.client.HTTPConnection, cut: threading.Event) -> None:
    """The watchdog: at the deadline the socket is shut, so a read blocked on a trickle returns (with
    what it had: ``cut`` tells the caller that the answer is not whole)."""
    cut.set()
    # The connection's own ``sock`` is gone once the response holds it (HTTP/1.0, Connection: close).
    sock = getattr(connection, "raw_sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def post(
    url: str, headers: dict[str, str], body: bytes, *, deadline: float, max_bytes: int, per_read: float = 30
) -> bytes:
    """POST ``body`` to ``url`` and return the answer's body (a 2xx); OutboundRefused says why not.

    ``deadline`` (time.monotonic()) bounds everything: resolving, connecting, sending, every read and
    the whole body. Redirects are refused, never followed."""
    target = target_of(url)
    if time.monotonic() >= deadline:
        raise OutboundRefused("out of time before the call was made")
    address = addresses(target, seconds=deadline - time.monotonic())[0]
    left = deadline - time.monotonic()
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    # The watchdog ends the call at the deadline; a socket timeout a little past it only catches a
    # read that outlives the watchdog, and ``per_read`` a silence shorter than what is left.
    connection = kind(target.host, target.port, address, timeout=min(per_read, left + 1))
    cut = threading.Event()
    watchdog = threading.Timer(max(0.0, left), _cut, args=(connection, cut))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        data = response.read(max_bytes + 1)
        status = response.status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if not cut.is_set():
            raise OutboundRefused(f"the endpoint could not be reached: {_reason(exc)}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if cut.is_set():
        raise OutboundRefused("out of time: the endpoint had not answered in full by the deadline")
    if 300 <= status < 400:
        raise OutboundRefused(
            f"the endpoint answered HTTP {status} (a redirect): the server follows no redirects, so set "
            "the base URL to where it leads"
        )
    if not 200 <= status < 300:
        detail = data[:ERROR_DETAIL_BYTES].decode("utf-8", "replace") or "(no body)"
        raise OutboundRefused(f"the endpoint answered HTTP {status}: {detail}")
    if len(data) > max_bytes:
        raise OutboundRefused(f"the endpoint's answer is longer than {max_bytes:,} bytes")
    return data


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or 'handshake'})"
    if isinstance(exc, socket.timeout | TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, http.client.HTTPException):
        return "its answer is not HTTP"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return "its answer is not HTTP"


_slots_lock = threading.Lock()
_slots_used = 0


@contextmanager
def reserve(scope: str, seconds: float) -> Iterator[None]:
    """A place for one outbound job of ``scope`` (a project) lasting at most ``seconds``: Busy when this
    process already runs CTXVIEW_OUTBOUND_MAX_CONCURRENT of them, or ``scope`` runs one anywhere (a lease
    in the shared cache, which expires by itself should a process die holding it)."""
    global _slots_used
    key, token = f"cv:outbound:{scope}", uuid.uuid4().hex
    # The project's lease first: a second job of one project is told so, whatever the process runs.
    if not cache.add(key, token, timeout=int(seconds) + 5):
        raise Busy("this project is already asking its endpoint: wait for that answer, then ask again")
    try:
        with _slots_lock:
            if _slots_used >= settings.CTXVIEW_OUTBOUND_MAX_CONCURRENT:
                raise Busy(
                    "the server is making as many outbound calls as it allows at once: try again shortly"
                )
            _slots_used += 1
        try:
            yield
        finally:
            with _slots_lock:
                _slots_used -= 1
    finally:
        if cache.get(key) == token:
            cache.delete(key)
