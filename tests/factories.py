"""Builders of test data: OTLP requests, users and projects."""

import os
import zlib

from django.contrib.auth import get_user_model
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest.keys import create_key
from ingest.models import Membership, Project, RawBatch
from ingest.store import process_batch


def kv(key: str, value) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def trace_request(
    spans: int = 3, trace_id: bytes | None = None, service: str = "agent", first_span: int = 1
) -> ExportTraceServiceRequest:
    """A traces request with ``spans`` chat spans of one trace, span ids counting from ``first_span``."""
    trace_id = trace_id or os.urandom(16)
    request = ExportTraceServiceRequest()
    resource_spans = request.resource_spans.add()
    resource_spans.resource.attributes.append(kv("service.name", service))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.scope.name = "tests"
    for number in range(first_span, first_span + spans):
        span = scope_spans.spans.add()
        span.trace_id = trace_id
        span.span_id = number.to_bytes(8, "big")
        span.name = f"chat model-{number}"
        span.kind = 3
        span.start_time_unix_nano = 1_700_000_000_000_000_000 + number * 1_000_000
        span.end_time_unix_nano = span.start_time_unix_nano + 500_000
        span.attributes.extend(
            [kv("gen_ai.operation.name", "chat"), kv("gen_ai.usage.input_tokens", 100 * number)]
        )
    return request


def logs_request(records: int = 2, trace_id: bytes | None = None) -> ExportLogsServiceRequest:
    trace_id = trace_id or os.urandom(16)
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.append(kv("service.name", "agent"))
    scope_logs = resource_logs.scope_logs.add()
    for number in range(1, records + 1):
        record = scope_logs.log_records.add()
        record.time_unix_nano = 1_700_000_000_000_000_000 + number
        record.observed_time_unix_nano = record.time_unix_nano
        record.trace_id = trace_id
        record.span_id = number.to_bytes(8, "big")
        record.event_name = "gen_ai.client.inference.operation.details"
        record.body.string_value = f"record {number}"
    return request


def user(username: str, superuser: bool = False):
    model = get_user_model()
    if superuser:
        return model.objects.create_superuser(username, password="pw-" + username)
    return model.objects.create_user(username, password="pw-" + username)


def project_with_key(slug: str, owner=None, role: str = Membership.Role.ADMIN) -> tuple[Project, str]:
    project = Project.objects.create(slug=slug, name=slug.title())
    if owner is not None:
        Membership.objects.create(project=project, user=owner, role=role)
    return project, create_key(project, name="test")


def chat_span(
    request,
    *,
    trace_id: bytes,
    number: int,
    messages: list[dict] | None = None,
    attributes: dict | None = None,
    parent: bytes = b"",
    start: int | None = None,
):
    """Add a GenAI chat span to a traces request (its first resource and scope)."""
    import json

    if not request.resource_spans:
        request.resource_spans.add().resource.attributes.append(kv("service.name", "agent"))
    resource_spans = request.resource_spans[0]
    scope_spans = (
        resource_spans.scope_spans[0] if resource_spans.scope_spans else resource_spans.scope_spans.add()
    )
    span = scope_spans.spans.add()
    span.trace_id = trace_id
    span.span_id = number.to_bytes(8, "big")
    span.parent_span_id = parent
    span.name = "chat model"
    span.kind = 3
    span.start_time_unix_nano = (
        start if start is not None else 1_700_000_000_000_000_000 + number * 1_000_000_000
    )
    span.end_time_unix_nano = span.start_time_unix_nano + 1_000
    values = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "m1",
    }
    if messages is not None:
        values["gen_ai.input.messages"] = json.dumps(messages)
    values.update(attributes or {})
    for key, value in values.items():
        span.attributes.append(kv(key, value))
    return span


def user_message(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant_message(text: str) -> dict:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def calls_with_cache(calls, broke: bool | None = None, **detail) -> list:
    """The calls (a queryset) whose cache analysis says ``broke`` (if given) and has these detail fields,
    in seq order. The analysis is stored packed (ingest.models.PackedJSONField): SQL cannot look inside."""
    found = []
    for call in calls.order_by("seq"):
        cache = (call.analysis or {}).get("cache") or {}
        details = cache.get("detail") or {}
        if (broke is None or cache.get("broke") == broke) and all(
            details.get(name) == value for name, value in detail.items()
        ):
            found.append(call)
    return found


def conversation_request(calls: int, key: str) -> ExportTraceServiceRequest:
    """One trace of ``calls`` chat calls of run ``key``, each resending the history with one more user
    message."""
    request = ExportTraceServiceRequest()
    for call in range(1, calls + 1):
        chat_span(
            request,
            trace_id=bytes([calls]) * 16,
            number=call,
            messages=[user_message(f"message {number}") for number in range(call)],
            attributes={"gen_ai.conversation.id": key},
        )
    return request


def processed(project: Project, request: ExportTraceServiceRequest) -> None:
    """``request`` stored as a raw batch of ``project`` and processed in this process, as a worker would."""
    data = request.SerializeToString()
    batch = RawBatch.objects.create(
        project=project,
        signal="traces",
        body=zlib.compress(data),
        content_type="protobuf",
        wire_bytes=len(data),
        item_count=sum(len(scope.spans) for spans in request.resource_spans for scope in spans.scope_spans),
    )
    assert process_batch(batch.id) == "done"
