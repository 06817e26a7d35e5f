"""An endpoint that redirects (an http:// address behind a redirect to https://, say): the SDK's calls are
not stored there, and the SDK says so instead of dropping them without a word. The key goes nowhere else."""

import logging

import ctxview_sdk
from tests.redirects import redirecting_elsewhere


def test_a_redirecting_endpoint_is_named_in_a_warning_and_gets_no_key_elsewhere(caplog):
    with redirecting_elsewhere(301) as (url, elsewhere, received):
        ctxview_sdk.configure(url, key="cvk_stays_home", timeout=2.0)
        with caplog.at_level(logging.WARNING, logger="ctxview_sdk"):
            with ctxview_sdk.call("run-redirect", 1, "claude-sonnet-4-5") as call:
                call.add_item("system:prompt", "system", "system", content="You are terse.")
            ctxview_sdk.flush(timeout=5.0)
        ctxview_sdk.shutdown(timeout=2.0)
    assert received == []
    assert (
        f"ctxview_sdk: the endpoint answered 301, a redirect to {elsewhere}/v1/traces; the calls were not "
        "stored: configure the final URL"
    ) in caplog.text
