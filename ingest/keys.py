"""Ingest keys: ``cvk_<key id>_<secret>``. The key id finds the row; only a hash of the key is stored."""

import hashlib
import hmac
import secrets
from collections.abc import Iterable

from django.http import HttpRequest

from ingest.models import IngestKey, Project

PREFIX = "cvk"


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(project: Project, name: str = "", user=None) -> str:
    """Create a key for ``project`` and return it; this is the only time it is ever visible."""
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    IngestKey.objects.create(
        project=project, name=name, key_id=key_id, key_hash=_digest(key), created_by=user
    )
    return key


def key_id(key: str) -> str | None:
    """The public key id of a well-formed key, or None."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1]:
        return None
    return parts[1]


def project_for_key(key: str) -> Project | None:
    """The project an active key belongs to, or None for a malformed, unknown or revoked key."""
    public_id = key_id(key)
    if public_id is None:
        return None
    row = (
        IngestKey.objects.select_related("project")
        .filter(key_id=public_id, revoked_at__isnull=True)
        .only("key_hash", "project")
        .first()
    )
    # compare_digest: the comparison takes the same time wherever the first difference is.
    if row is None or not hmac.compare_digest(row.key_hash, _digest(key)):
        return None
    return row.project


def key_from_request(request: HttpRequest) -> str | None:
    """The key sent as ``Authorization: Bearer KEY`` or ``x-ctxview-key: KEY``."""
    return _key(request.headers.get("Authorization", ""), request.headers.get("X-Ctxview-Key", ""))


def key_from_metadata(metadata: Iterable[tuple[str, str | bytes]]) -> str | None:
    """The key sent in gRPC metadata as ``authorization: Bearer KEY`` or ``x-ctxview-key: KEY``."""
    # gRPC metadata keys are lower-case; binary values (keys ending in -bin) cannot carry a key.
    values = {name.lower(): value for name, value in metadata if isinstance(value, str)}
    return _key(values.get("authorization", ""), values.get("x-ctxview-key", ""))


def _key(authorization: str, ctxview_key: str) -> str | None:
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return ctxview_key.strip() or None
