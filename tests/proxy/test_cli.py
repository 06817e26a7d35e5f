"""``ctxview proxy`` is the proxy's own command line under the ``ctxview`` console script; one proxy per
spool folder."""

import os
import subprocess
from pathlib import Path

import pytest

from ctxview import cli
from ctxview.proxy import cli as proxy_cli
from ctxview.proxy import spool
from tests.proxy.test_recording import ROOT, proxy_command, start_proxy_process, stop


def test_ctxview_proxy_hands_its_options_to_the_proxy(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--help"])
    assert exited.value.code == 0
    assert "--send-to" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--upstream", "evil=http://x"])  # its own checks
    assert exited.value.code == 2
    assert "--upstream takes NAME=URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    "send_to", ["localhost:8000", "127.0.0.1:8000", "ftp://ctxview", "http://", "http://x?y=1"]
)
def test_a_receiver_url_it_cannot_send_to_is_refused_at_start(send_to, capsys):
    """Else every call would wait in the spool as if the receiver were down, retried for ever."""
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--send-to", send_to, "--key", "cvk_x"])
    assert exited.value.code == 2
    assert f"--send-to takes the ctxview server's URL, http://HOST:PORT or https://HOST, not {send_to!r}" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("send_to", "kept"),
    [
        ("http://ctxview:8000", "http://ctxview:8000"),
        ("https://ctxview.example/", "https://ctxview.example"),
        ("http://ctxview:8000/v1/traces", "http://ctxview:8000"),  # as the SDK takes it
        ("https://example.com/ctxview/", "https://example.com/ctxview"),  # under a path prefix
    ],
)
def test_the_receiver_url_is_the_servers_with_or_without_its_otlp_path(send_to, kept):
    assert proxy_cli.parser().parse_args(["--send-to", send_to]).send_to == kept


def test_a_key_with_a_space_inside_is_refused_and_a_trailing_line_break_dropped(capsys, monkeypatch):
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--send-to", "http://ctxview", "--key", "cvk_a cvk_b"])
    assert exited.value.code == 2
    assert "argument --key: an ingest key has no spaces or line breaks inside it" in capsys.readouterr().err
    assert proxy_cli.parser().parse_args(["--send-to", "http://c", "--key", "cvk_a\n"]).key == "cvk_a"
    monkeypatch.setenv("CTXVIEW_INGEST_KEY", "cvk_from_a_file\n")
    assert proxy_cli.parser().parse_args(["--send-to", "http://c"]).key == "cvk_from_a_file"


def test_a_spool_folder_is_held_by_one_proxy_at_a_time(tmp_path):
    held = spool.lock(tmp_path / "spool")
    try:
        with pytest.raises(spool.InUse, match=f"spool folder {tmp_path / 'spool'}: stop it"):
            spool.lock(tmp_path / "spool")
        os.close(spool.lock(tmp_path / "another"))  # another folder is free
    finally:
        os.close(held)
    os.close(spool.lock(tmp_path / "spool"))  # free again once closed


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads the processes' descriptors in /proc")
def test_a_second_proxy_on_the_same_spool_folder_exits_naming_it(fake, tmp_path):
    """Two proxies on one spool would send the same spans twice."""
    first, _url = start_proxy_process(fake, tmp_path / "spool")
    try:
        second = subprocess.run(
            proxy_command(fake, tmp_path / "spool"), cwd=ROOT, capture_output=True, text=True, timeout=30
        )
        assert second.returncode == 1
        assert f"another ctxview proxy is using the spool folder {tmp_path / 'spool'}" in second.stderr
        # The recording process holds the lock too: it outlives a forwarding process killed before it
        # recorded what it was handed.
        (child,) = [
            int(pid) for pid in Path(f"/proc/{first.pid}/task/{first.pid}/children").read_text().split()
        ]
        held = {os.readlink(fd) for fd in Path(f"/proc/{child}/fd").iterdir() if fd.is_symlink()}
        assert str(tmp_path / "spool" / spool.LOCK) in held
    finally:
        stop(first)
    os.close(spool.lock(tmp_path / "spool"))  # released once both have ended
