"""``ctxview proxy`` is the proxy's own command line under the ``ctxview`` console script."""

import pytest

from ctxview import cli


def test_ctxview_proxy_hands_its_options_to_the_proxy(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--help"])
    assert exited.value.code == 0
    assert "--send-to" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        cli.main(["proxy", "--upstream", "evil=http://x"])  # its own checks
    assert exited.value.code == 2
    assert "--upstream takes NAME=URL" in capsys.readouterr().err
