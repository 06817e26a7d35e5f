"""Security headers, rate limits per key, the deployment check, and no secrets in logs."""

import logging
import os
import secrets
import shlex
import subprocess
import sys

import pytest

from ingest.keys import create_key
from tests import factories
from tests.services import ROOT


def test_pages_and_the_api_carry_strict_security_headers(client, alice, project):
    client.force_login(alice)
    for path in ("/", f"/projects/{project.slug}/", "/api/v1/runs", "/login/"):
        response = client.get(path)
        policy = response["Content-Security-Policy"]
        assert (
            "script-src 'self';" in policy
            and "object-src 'none'" in policy
            and "frame-ancestors 'none'" in policy
        )
        assert "unsafe-eval" not in policy
        assert response["X-Frame-Options"] == "DENY"
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"


def test_an_ingest_key_beyond_its_rate_gets_503_with_retry_after(client, project, key, settings, monkeypatch):
    settings.CTXVIEW_INGEST_RATE_LIMIT = 2
    monkeypatch.setattr("ingest.ratelimit.time.time", lambda: 1_800_000_000.5)  # all in one second
    body = factories.trace_request(spans=1).SerializeToString()

    def post():
        return client.post(
            "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
        )

    assert [post().status_code for _ in range(2)] == [200, 200]
    refused = post()
    assert refused.status_code == 503
    assert refused["Retry-After"] == "1"
    # Another key of the same project has its own budget.
    other = create_key(project)
    assert (
        client.post(
            "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {other}"
        ).status_code
        == 200
    )


def test_the_deployment_check_is_clean_with_production_settings(tmp_path):
    env = os.environ | {
        "CTXVIEW_SECRET_KEY": secrets.token_urlsafe(60),
        "CTXVIEW_HTTPS": "true",
        "CTXVIEW_ALLOWED_HOSTS": "ctxview.example.com",
        "CTXVIEW_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def readme_production_variables() -> dict[str, str]:
    """The variables the README's production block exports, as written there."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Production and scaling", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    variables = {}
    for line in block.splitlines():
        if line.startswith("export "):
            variables.update(part.split("=", 1) for part in shlex.split(line)[1:])
    return variables


def test_the_readme_production_block_passes_the_deployment_check(tmp_path):
    variables = readme_production_variables()
    assert variables["CTXVIEW_SECRET_KEY"] == "…"  # the one placeholder a reader must fill in
    # With the placeholder itself ctxview refuses to start, saying why.
    refused = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=os.environ | variables | {"CTXVIEW_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode != 0 and "is a published default" in refused.stderr
    env = (
        os.environ
        | variables
        | {
            "CTXVIEW_SECRET_KEY": secrets.token_urlsafe(60),
            "CTXVIEW_DATA_DIR": str(tmp_path),
        }
    )
    env.pop("CTXVIEW_DEBUG", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)" in result.stdout


@pytest.mark.parametrize("key", ["change-me", "build", "django-insecure-abc"])
def test_a_published_secret_key_stops_the_start_outside_debug(tmp_path, key):
    env = os.environ | {"CTXVIEW_SECRET_KEY": key, "CTXVIEW_DATA_DIR": str(tmp_path)}
    env.pop("CTXVIEW_DEBUG", None)
    args = [sys.executable, "manage.py", "check"]
    refused = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert f"CTXVIEW_SECRET_KEY={key!r} is a published default" in refused.stderr
    debug = env | {"CTXVIEW_DEBUG": "true"}
    assert subprocess.run(args, cwd=ROOT, env=debug, capture_output=True, timeout=120).returncode == 0


def test_https_settings_redirect_pages_but_never_the_receiver(tmp_path):
    code = (
        "import django; django.setup(); from django.test import Client;"
        "c = Client(HTTP_HOST='ctxview.example.com');"
        "page = c.get('/login/').status_code;"
        "otlp = c.post('/v1/traces', b'', content_type='application/x-protobuf').status_code;"
        "print(page, otlp)"
    )
    env = os.environ | {
        "CTXVIEW_HTTPS": "true",
        "CTXVIEW_ALLOWED_HOSTS": "ctxview.example.com",
        "CTXVIEW_DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "ctxview.settings",
    }
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.stdout.split() == ["301", "401"], result.stderr


@pytest.mark.django_db
def test_keys_and_prompt_content_never_reach_the_logs(client, key, caplog):
    caplog.set_level(logging.DEBUG)
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(
        factories.kv(
            "gen_ai.input.messages",
            '[{"role": "user", "parts": [{"type": "text", "content": "zebra-secret-77"}]}]',
        )
    )
    body = request.SerializeToString()
    client.post("/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}")
    client.post(
        "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}x"
    )
    client.post(
        "/v1/traces", b"\xff\xff", content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert key.split("_", 2)[2] not in logged
    assert "zebra-secret-77" not in logged
