"""The API's reference for people at /api/v1/docs: Swagger UI rendering /api/v1/openapi.json.

Swagger UI comes from drf-spectacular-sidecar, served from our static files like everything else (no CDN,
nothing fetched at run time). Swagger UI rather than Redoc: its "Try it out" sends real requests with the
Bearer key or token given under "Authorize" (or the session, with its CSRF token), so a reader can check an
answer against the description. Public, as the document it renders is.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    # Swagger UI and its start-up script are static files: the page keeps every page's strict policy.
    return render(request, "ctxview/api_docs.html", {"title": "API reference"})
