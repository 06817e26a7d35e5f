import zlib

import pytest

from ingest.models import RawBatch
from ingest.store import process_batch
from tests import factories

TRACE_ID = bytes(range(1, 17))


@pytest.fixture
def stored_trace(project):
    data = factories.trace_request(spans=2, trace_id=TRACE_ID).SerializeToString()
    batch = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=zlib.compress(data),
        content_type="protobuf",
        wire_bytes=len(data),
        item_count=2,
    )
    process_batch(batch.id)
    return TRACE_ID.hex()


def test_reads_a_trace_with_the_projects_key(client, key, stored_trace):
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200
    body = response.json()
    assert [span["span_id"] for span in body["spans"]] == ["0000000000000001", "0000000000000002"]
    assert body["spans"][0]["service"] == "agent"
    assert body["spans"][0]["attributes"]["gen_ai.usage.input_tokens"] == 100


def test_another_projects_key_gets_404(client, bob, stored_trace):
    _, other_key = factories.project_with_key("beta", owner=bob)
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {other_key}")
    assert response.status_code == 404
    assert response.json() == {"error": "no such trace"}


def test_a_member_reads_with_a_session_and_a_stranger_gets_404(client, alice, bob, stored_trace):
    client.force_login(alice)
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 200
    client.force_login(bob)
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 404


def test_a_superuser_reads_every_project(client, stored_trace):
    client.force_login(factories.user("root", superuser=True))
    assert client.get(f"/api/v1/traces/{stored_trace}").status_code == 200


def test_no_credentials_get_401(client, stored_trace):
    response = client.get(f"/api/v1/traces/{stored_trace}")
    assert response.status_code == 401
    assert response.json() == {"error": "send 'Authorization: Bearer <key>' or log in"}


def test_a_revoked_key_gets_401(client, project, key, stored_trace):
    project.keys.get().revoke()
    response = client.get(f"/api/v1/traces/{stored_trace}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 401


def test_a_malformed_trace_id_gets_400(client, key):
    response = client.get("/api/v1/traces/xyz", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 400
    assert response.json() == {"error": "trace id must be 32 hex characters"}
