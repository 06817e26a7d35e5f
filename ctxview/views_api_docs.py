"""The API's reference for people at /api/v1/docs: Swagger UI rendering /api/v1/openapi.json.

Swagger UI comes from drf-spectacular-sidecar, served from our static files like everything else (no CDN,
nothing fetched at run time). Swagger UI rather than Redoc: its "Try it out" sends real requests with the
Bearer key or token given under "Authorize" (or the session, with its CSRF token), so a reader can check an
answer against the description. Public, as the document it renders is.
"""

import secrets

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ctxview.security import CONTENT_SECURITY_POLICY


def policy_with_script_nonce(policy: str, nonce: str) -> str:
    """``policy`` with one more source for scripts: the inline script carrying ``nonce``."""
    directives = [directive.strip() for directive in policy.split(";") if directive.strip()]
    names = [directive.split()[0] for directive in directives]
    source = f"'nonce-{nonce}'"
    if "script-src" in names:
        index = names.index("script-src")
        directives[index] = f"{directives[index]} {source}"
    else:  # scripts fall back to default-src: keep what it allows ('none' stands only alone), add the nonce
        fallback = directives[names.index("default-src")].split()[1:] if "default-src" in names else []
        directives.append(" ".join(["script-src", *(s for s in fallback if s != "'none'"), source]))
    return "; ".join(directives)


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    # Swagger UI is started by one inline script (its options, the spec's URL). The page's own policy
    # allows that script by its nonce and nothing else; every other page keeps the strict one, which the
    # security middleware sets only where a view has not (ctxview.security.SecurityHeadersMiddleware).
    nonce = secrets.token_urlsafe(16)
    response = render(request, "ctxview/api_docs.html", {"title": "API reference", "nonce": nonce})
    policy = getattr(settings, "CTXVIEW_CONTENT_SECURITY_POLICY", CONTENT_SECURITY_POLICY)
    response["Content-Security-Policy"] = policy_with_script_nonce(policy, nonce)
    return response
