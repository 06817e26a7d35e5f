"""The server's outbound calls (ctxview/outbound.py) attacked with real sockets: every spelling of a local
address refused when saved and when called (nothing connects), no redirect followed, a deadline that
holds against a trickle, a body limit, places per process and per project; keys sealed and bound to
their URL; the operator's switch and an instance admin's grant."""

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import call_command
from django.test import override_settings

from ctxview import outbound, sealing, writes
from ctxview.models import OutboundGrant, ReaskEndpoint
from ctxview.outbound import OutboundRefused
from ctxview.reask import question_from, reask_window
from ctxview.writes import Refused
from tests import factories

KEY = "sk-test-0123456789abcdef"
# Loopback as the fakes' address: the operator allows this one address, so every other spelling of
# loopback (127.0.0.1, ::1, 0.0.0.0, names) is still refused.
FAKE_HOST = "127.0.0.2"


@pytest.fixture(autouse=True)
def outbound_on(settings):
    settings.CTXVIEW_OUTBOUND_ENABLED = True
    settings.CTXVIEW_OUTBOUND_ALLOW = [FAKE_HOST]
    settings.CTXVIEW_REASK_DEADLINE_SECONDS = 3


class Listener:
    """A TCP port on loopback (IPv4 and IPv6) that counts the connections made to it."""

    def __init__(self):
        self.v4 = socket.create_server(("127.0.0.1", 0))
        self.port = self.v4.getsockname()[1]
        self.v6 = socket.create_server(("::1", self.port), family=socket.AF_INET6)
        self.accepted = 0
        for sock in (self.v4, self.v6):
            sock.settimeout(0.2)
            threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def _accept(self, sock):
        while True:
            try:
                connection, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            connection.close()

    def close(self):
        self.v4.close()
        self.v6.close()


@pytest.fixture
def listener():
    found = Listener()
    yield found
    found.close()


def loopback_spellings(port: int) -> list[str]:
    return [
        f"http://localhost:{port}/",
        f"http://LOCALHOST.:{port}/",
        f"http://127.0.0.1:{port}/",
        f"http://127.1:{port}/",
        f"http://0.0.0.0:{port}/",
        f"http://0:{port}/",
        f"http://2130706433:{port}/",
        f"http://0x7f000001:{port}/",
        f"http://0177.0.0.1:{port}/",
        f"http://[::1]:{port}/",
        f"http://[::]:{port}/",
        f"http://[::ffff:127.0.0.1]:{port}/",
        f"http://[::ffff:7f00:1]:{port}/",
        f"https://localhost.localdomain:{port}/",
        f"http://{socket.gethostname()}:{port}/",  # a name that resolves to loopback here (/etc/hosts)
    ]


def test_the_machines_own_name_resolves_to_a_local_address():
    """The last spelling above is a name the resolver maps to loopback: the test relies on it."""
    found = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), 80, type=socket.SOCK_STREAM)}
    assert found and all(outbound.why_refused(outbound.ipaddress.ip_address(a)) for a in found), found


def test_every_spelling_of_loopback_is_refused_when_saved_and_when_called(listener, inspect_project):
    project, admin = inspect_project
    for url in loopback_spellings(listener.port):
        with pytest.raises(Refused, match="base_url: .*(loopback|unspecified|local or internal)"):
            writes.set_reask_endpoint(project, admin, provider="openai", base_url=url, model="m", key=KEY)
        with pytest.raises(OutboundRefused, match="loopback|unspecified|local or internal"):
            outbound.post(url, {}, b"{}", deadline=time.monotonic() + 2, max_bytes=100)
    time.sleep(0.3)  # a connection made would have been accepted by now
    assert listener.accepted == 0
    assert not ReaskEndpoint.objects.exists()


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://0xa9fea9fe/", "link-local"),  # the same, in hex
        ("http://2852039166/", "link-local"),  # and in decimal
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),  # NAT64 of it
        ("http://[2002:a9fe:a9fe::]/", "link-local"),  # 6to4 of it
        ("http://metadata.google.internal/computeMetadata/v1/", "local or internal"),
        ("http://metadata/", "local or internal"),
        ("http://printer.local/", "local or internal"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://100.64.0.1/", "not a public address"),  # shared address space (carrier NAT)
        ("http://[fd00:ec2::254]/", "private"),
        ("http://[fe80::1]/", "link-local"),
        ("http://224.0.0.1/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://240.0.0.1/", "private|reserved"),
    ],
)
def test_link_local_private_and_internal_targets_are_refused_before_any_connection(url, reason):
    with pytest.raises(OutboundRefused, match=reason):
        outbound.addresses(outbound.target_of(url))
    with pytest.raises(OutboundRefused, match=reason):
        outbound.check_url(url)


def test_public_addresses_pass_and_the_operator_allows_named_hosts_and_networks(settings):
    assert outbound.addresses(outbound.target_of("https://93.184.216.34/v1")) == ["93.184.216.34"]
    assert outbound.addresses(outbound.target_of("https://[2606:4700::1111]/")) == ["2606:4700::1111"]
    # A name that does not resolve here may be saved; the call resolves it and checks again.
    assert outbound.check_url("https://api.anthropic.com").host == "api.anthropic.com"
    with pytest.raises(OutboundRefused, match="could not be resolved"):
        outbound.post(
            "https://api.anthropic.com/v1/messages", {}, b"", deadline=time.monotonic() + 2, max_bytes=1
        )
    settings.CTXVIEW_OUTBOUND_ALLOW = ["10.20.0.0/16", "llm-gateway.internal"]
    assert outbound.addresses(outbound.target_of("http://10.20.3.4:8080/")) == ["10.20.3.4"]
    assert outbound.check_url("http://llm-gateway.internal/v1").host == "llm-gateway.internal"
    with pytest.raises(OutboundRefused, match="private"):
        outbound.check_url("http://10.21.0.1/")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://example.com/",
        "http://user:pw@example.com/",
        "http://a b/",
        "http://x:0/",
    ],
)
def test_malformed_urls_are_refused(url):
    with pytest.raises(OutboundRefused, match="the URL"):
        outbound.target_of(url)


class Recorder(BaseHTTPRequestHandler):
    """A fake endpoint whose answer each test sets: ``server.answer(handler)``."""

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.received.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
        self.server.answer(self)

    def log_message(self, *args):
        pass


def serve(answer, host: str = FAKE_HOST) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, 0), Recorder)
    server.daemon_threads = True
    server.received, server.answer = [], answer
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def servers():
    started = []
    yield lambda answer, host=FAKE_HOST: started.append(serve(answer, host)) or started[-1]
    for server in started:
        server.shutdown()
        server.server_close()


def json_answer(handler, status: int = 200, data: bytes = b'{"ok": true}') -> None:
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_credentials_go_nowhere_else(servers, status):
    inner = servers(json_answer, host="127.0.0.1")
    target = f"http://127.0.0.1:{inner.server_port}/steal"

    def redirect(handler):
        handler.send_response(status)
        handler.send_header("location", target)
        handler.send_header("content-length", "0")
        handler.end_headers()

    outer = servers(redirect)
    url = f"http://{FAKE_HOST}:{outer.server_port}/v1/messages"
    with pytest.raises(OutboundRefused, match=f"HTTP {status} \\(a redirect\\).*follows no redirects"):
        outbound.post(url, {"x-api-key": KEY}, b"{}", deadline=time.monotonic() + 3, max_bytes=1000)
    assert len(outer.received) == 1 and outer.received[0]["headers"]["x-api-key"] == KEY
    assert inner.received == []


def trickle(handler):
    """Headers at once, then a byte of the body every 0.1 s: each read is quick, the answer endless."""
    handler.send_response(200)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", "100000")
    handler.end_headers()
    for _ in range(300):
        try:
            handler.wfile.write(b" ")
            handler.wfile.flush()
        except OSError:
            return
        time.sleep(0.1)


def silent(handler):
    time.sleep(10)


def slow_headers(handler):
    for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 200:
        try:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
        except OSError:
            return
        time.sleep(0.1)


@pytest.mark.timing
@pytest.mark.parametrize("answer", [trickle, silent, slow_headers])
def test_the_deadline_holds_against_an_endpoint_that_trickles_or_stalls(servers, answer):
    server = servers(answer)
    started = time.monotonic()
    with pytest.raises(OutboundRefused, match="out of time"):
        outbound.post(
            f"http://{FAKE_HOST}:{server.server_port}/",
            {},
            b"{}",
            deadline=started + 1.5,
            max_bytes=1_000_000,
        )
    took = time.monotonic() - started
    # Released at the deadline (1.5 s), not at a per-read timeout nor at the end of the trickle (30 s).
    assert 1.4 <= took < 2.5, took


def test_an_answer_over_the_body_limit_is_refused(servers):
    server = servers(lambda handler: json_answer(handler, data=b"[" + b"1," * 600_000 + b"1]"))
    with pytest.raises(OutboundRefused, match="longer than 1,000,000 bytes"):
        outbound.post(
            f"http://{FAKE_HOST}:{server.server_port}/",
            {},
            b"{}",
            deadline=time.monotonic() + 5,
            max_bytes=10**6,
        )


def test_an_error_answer_is_a_sentence_with_a_bounded_excerpt(servers):
    server = servers(lambda handler: json_answer(handler, 500, b"overloaded " * 100))
    with pytest.raises(OutboundRefused) as refused:
        outbound.post(
            f"http://{FAKE_HOST}:{server.server_port}/", {}, b"", deadline=time.monotonic() + 3, max_bytes=9
        )
    message = str(refused.value)
    assert message.startswith("the endpoint answered HTTP 500: overloaded")
    assert len(message) < 40 + outbound.ERROR_DETAIL_BYTES


def test_a_project_runs_one_outbound_job_and_a_process_a_few(settings):
    settings.CTXVIEW_OUTBOUND_MAX_CONCURRENT = 2
    with outbound.reserve("project:1", 5):
        with pytest.raises(outbound.Busy, match="already asking"), outbound.reserve("project:1", 5):
            pass
        with outbound.reserve("project:2", 5):
            with (
                pytest.raises(outbound.Busy, match="as many outbound calls"),
                outbound.reserve("project:3", 5),
            ):
                pass
    with outbound.reserve("project:1", 5), outbound.reserve("project:3", 5):
        pass  # released on the way out, refusals included


# --- Keys, the switch and the grant -----------------------------------------------------------------


@pytest.fixture
def inspect_project(db):
    admin = factories.user("outbound-admin")
    project, _ = factories.project_with_key("outbound", owner=admin)
    OutboundGrant.objects.create(project=project)
    return project, admin


def test_the_key_is_stored_sealed_and_bound_to_its_provider_and_url(inspect_project, servers):
    project, admin = inspect_project
    first = servers(json_answer)
    other = servers(json_answer)
    base = f"http://{FAKE_HOST}:{first.server_port}"
    writes.set_reask_endpoint(project, admin, provider="anthropic", base_url=base, model="m", key=KEY)
    stored = ReaskEndpoint.objects.get(project=project)
    assert KEY not in stored.sealed_key and sealing.unseal(stored.sealed_key) == KEY
    assert stored.masked_key == "…cdef"
    writes.set_reask_endpoint(project, admin, provider="anthropic", base_url=base, model="m2")  # same URL
    assert sealing.unseal(ReaskEndpoint.objects.get(project=project).sealed_key) == KEY
    moved = f"http://{FAKE_HOST}:{other.server_port}"
    for change in ({"base_url": moved}, {"provider": "openai"}):
        with pytest.raises(Refused, match="key must be given again"):
            writes.set_reask_endpoint(
                project, admin, **{"provider": "anthropic", "base_url": base, "model": "m", **change}
            )
    assert ReaskEndpoint.objects.get(project=project).base_url == base
    # A re-ask now still goes only to the URL the key was given for.
    endpoint = ReaskEndpoint.objects.get(project=project)
    result = reask_window(endpoint, [], question_from(["a?"], "b"), deadline=time.monotonic() + 3)
    assert result["reason"] is None or "format" in result["reason"]
    assert len(first.received) == 1 and first.received[0]["headers"]["x-api-key"] == KEY
    assert other.received == []


def test_a_key_sealed_under_another_encryption_key_is_not_sent(inspect_project, servers):
    project, admin = inspect_project
    server = servers(json_answer)
    writes.set_reask_endpoint(
        project,
        admin,
        provider="anthropic",
        base_url=f"http://{FAKE_HOST}:{server.server_port}",
        model="m",
        key=KEY,
    )
    endpoint = ReaskEndpoint.objects.get(project=project)
    with override_settings(CTXVIEW_ENCRYPTION_KEY="another-key-entirely"):
        result = reask_window(endpoint, [], question_from(["a?"], "b"), deadline=time.monotonic() + 3)
    assert result["reask"] is None and "can no longer be read" in result["reason"]
    assert server.received == []


def test_nothing_calls_out_while_the_operator_switch_is_off(inspect_project, settings, client):
    project, admin = inspect_project
    settings.CTXVIEW_OUTBOUND_ENABLED = False
    with pytest.raises(Refused, match="CTXVIEW_OUTBOUND_ENABLED"):
        writes.set_reask_endpoint(
            project, admin, provider="openai", base_url="https://api.openai.com/v1", model="m", key=KEY
        )
    client.force_login(admin)
    page = client.get(f"/projects/{project.slug}/settings").content.decode()
    assert "outbound calls are off on this instance" in page.lower()
    assert 'name="base_url"' not in page  # no form to fill in


def test_a_new_projects_admin_cannot_set_an_endpoint_until_an_instance_admin_allows_it(db, client):
    owner = factories.user("newcomer")
    project, _ = factories.project_with_key("fresh", owner=owner)
    client.force_login(owner)
    form = {"provider": "openai", "base_url": "https://api.openai.com/v1", "model": "m", "key": KEY}
    response = client.post(f"/projects/{project.slug}/settings/reask", form, follow=True)
    assert "until an instance admin allows it" in response.content.decode()
    assert not ReaskEndpoint.objects.exists()
    # Nor may they grant it to themselves.
    response = client.post(f"/projects/{project.slug}/settings/outbound", {"allow": "1"}, follow=True)
    assert "only an instance admin" in response.content.decode()
    assert not OutboundGrant.objects.exists()

    root = factories.user("root", superuser=True)
    client.force_login(root)
    client.post(f"/projects/{project.slug}/settings/outbound", {"allow": "1"})
    assert OutboundGrant.objects.get(project=project).granted_by == root
    client.force_login(owner)
    client.post(f"/projects/{project.slug}/settings/reask", form)
    assert ReaskEndpoint.objects.get(project=project).base_url == form["base_url"]

    client.force_login(root)
    client.post(f"/projects/{project.slug}/settings/outbound", {"allow": "0"})
    assert not OutboundGrant.objects.exists() and not ReaskEndpoint.objects.exists()


def test_the_outbound_command_lists_allows_and_revokes(db, capsys):
    project, _ = factories.project_with_key("cmd")
    call_command("outbound", "allow", "cmd")
    assert OutboundGrant.objects.filter(project=project).exists()
    call_command("outbound", "list")
    printed = capsys.readouterr().out
    assert "outbound calls on this instance: on" in printed and "cmd\tallowed" in printed
    call_command("outbound", "revoke", "cmd")
    assert not OutboundGrant.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_key_stored_in_the_clear_before_is_sealed_by_the_migration():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before = [("ctxview", "0003_reask_endpoint")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    project = old.get_model("ingest", "Project").objects.create(slug="old", name="old")
    old.get_model("ctxview", "ReaskEndpoint").objects.create(
        project_id=project.id, provider="openai", base_url="https://api.openai.com/v1", api_key=KEY, model="m"
    )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    endpoint = ReaskEndpoint.objects.get(project_id=project.id)
    assert sealing.unseal(endpoint.sealed_key) == KEY and KEY not in endpoint.sealed_key
    assert endpoint.masked_key == "…cdef"
