"""``ctxview proxy`` is the proxy's own command line under the ``ctxview`` console script; one proxy per
spool folder."""

import os
import subprocess
from pathlib import Path

import pytest

from ctxview import cli
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
