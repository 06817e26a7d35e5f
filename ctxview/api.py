"""The JSON read API under /api/v1/. Errors are JSON with a one-line message."""

import re

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from ctxview.access import NotAuthenticated, api_projects
from ingest.models import Span

_TRACE_ID = re.compile(r"^[0-9a-f]{32}$")


def error(message: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@require_GET
def trace_spans(request: HttpRequest, trace_id: str) -> JsonResponse:
    """The stored spans of one trace, in start order."""
    try:
        projects = api_projects(request)
    except NotAuthenticated as exc:
        return error(str(exc), 401)
    trace_id = trace_id.lower()
    if not _TRACE_ID.match(trace_id):
        return error("trace id must be 32 hex characters", 400)
    spans = (
        Span.objects.filter(project__in=projects, trace_id=trace_id)
        .select_related("resource")
        .order_by("start_time_unix_nano", "span_id")
    )
    rows = [
        {
            "trace_id": span.trace_id,
            "span_id": span.span_id,
            "parent_span_id": span.parent_span_id or None,
            "name": span.name,
            "kind": span.kind,
            "start_time_unix_nano": span.start_time_unix_nano,
            "end_time_unix_nano": span.end_time_unix_nano,
            "status": {"code": span.status_code, "message": span.status_message},
            "service": span.resource.service_name,
            "scope": {"name": span.scope_name, "version": span.scope_version},
            "attributes": span.attributes,
            "events": span.events,
            "links": span.links,
        }
        for span in spans
    ]
    if not rows:
        return error("no such trace", 404)
    return JsonResponse({"trace_id": trace_id, "spans": rows})
