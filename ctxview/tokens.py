"""Personal API tokens: ``cvt_<token id>_<secret>``, a user's own credential for the JSON API.

A project's ingest key (``cvk_…``, ``ingest.keys``) sends traces and reads its project; a token acts as
its user under ``/api/v1/``: it reads what the user may read and writes what the user's roles allow
(only reads, when read-only). The token id finds the row; only a hash of the token is stored.

``ApiTokenMiddleware`` is the one place a token is honoured: it sets ``request.user`` and exempts the
request from CSRF (a token is no cookie: another site's page cannot make a browser send it).
"""

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

from ctxview.models import ApiToken

PREFIX = "cvt"
API_PATH = "/api/v1/"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# last_used_at is written at most this often per token, not on every request.
TOUCH_EVERY = timedelta(minutes=1)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(user, name: str = "", read_only: bool = False) -> tuple[ApiToken, str]:
    """A new token of ``user``: the row, and the token itself (the only time it is ever visible)."""
    token_id = secrets.token_hex(6)
    token = f"{PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
    row = ApiToken.objects.create(
        user=user, name=name, token_id=token_id, token_hash=_digest(token), read_only=read_only
    )
    return row, token


def is_token(value: str) -> bool:
    """Whether a credential is a personal token (not an ingest key)."""
    return value.startswith(f"{PREFIX}_")


def token_id(token: str) -> str | None:
    """The public token id of a well-formed token, or None."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1]


def find_token(token: str) -> ApiToken | None:
    """The active token's row (with its user), or None for a malformed, unknown or revoked token, or one
    of a deactivated user."""
    public_id = token_id(token)
    if public_id is None:
        return None
    row = (
        ApiToken.objects.select_related("user")
        .filter(token_id=public_id, revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    # compare_digest: the comparison takes the same time wherever the first difference is.
    if row is None or not hmac.compare_digest(row.token_hash, _digest(token)):
        return None
    return row


def token_from_request(request: HttpRequest) -> str | None:
    """The personal token sent as ``Authorization: Bearer cvt_…``, or None (no header, or an ingest key)."""
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not is_token(value):
        return None
    return value


def touch(row: ApiToken) -> None:
    """Record the token's use, at most once every ``TOUCH_EVERY``."""
    now = timezone.now()
    if row.last_used_at is not None and now - row.last_used_at < TOUCH_EVERY:
        return
    # Conditional: of concurrent requests one writes, and a later value is never overwritten by an earlier.
    ApiToken.objects.filter(id=row.id, last_used_at=row.last_used_at).update(last_used_at=now)
    row.last_used_at = now


class ApiTokenMiddleware:
    """Authenticates ``Authorization: Bearer cvt_…`` under ``/api/v1/`` as the token's user.

    After AuthenticationMiddleware (whose session user the token replaces) and before CsrfViewMiddleware.
    An invalid or revoked token is a 401, never an anonymous request; a read-only token's write a 403.
    Any other request (a session, an ingest key, nothing) passes untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = token_from_request(request) if request.path_info.startswith(API_PATH) else None
        if token is None:
            return self.get_response(request)
        row = find_token(token)
        if row is None:
            return JsonResponse({"error": "invalid or revoked API token"}, status=401)
        if row.read_only and request.method not in SAFE_METHODS:
            return JsonResponse({"error": "this API token is read-only: it cannot write"}, status=403)
        user = row.user
        request.user = user

        async def auser():
            return user

        request.auser = auser
        # Django's own switch for a request that needs no CSRF check (CsrfViewMiddleware.process_view and
        # the API's explicit check in api_common.review_view both read it): the credential is the header.
        request._dont_enforce_csrf_checks = True
        touch(row)
        return self.get_response(request)
