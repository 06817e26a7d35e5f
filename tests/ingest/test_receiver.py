import gzip
import json
import zlib

import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest import accept, otlp
from ingest.models import LogRecord, RawBatch, Span
from tests import factories

PROTOBUF = "application/x-protobuf"


@pytest.fixture
def post(client, key, django_capture_on_commit_callbacks):
    def post(path="/v1/traces", body=b"", content_type=PROTOBUF, key=key, **headers):
        if key is not None:
            headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        # Run what the receiver enqueues on commit (the batch task, eager in these tests).
        with django_capture_on_commit_callbacks(execute=True):
            return client.generic("POST", path, body, content_type=content_type, **headers)

    return post


def status_message(response) -> str:
    if response["Content-Type"] == PROTOBUF:
        status = status_pb2.Status()
        status.ParseFromString(response.content)
        return status.message
    return response.json()["message"]


def assert_nothing_stored():
    assert RawBatch.objects.count() == 0
    assert Span.objects.count() == 0


def test_stores_a_protobuf_batch_and_answers_in_protobuf(post, project):
    response = post(body=factories.trace_request(spans=3).SerializeToString())
    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert not answer.HasField("partial_success")
    batch = RawBatch.objects.get()
    assert (batch.project, batch.status, batch.item_count, batch.content_type) == (
        project,
        "done",
        3,
        "protobuf",
    )
    assert Span.objects.filter(project=project).count() == 3


def test_accepts_otlp_json_with_hex_ids_string_int64_and_unknown_fields(post):
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "futureField": {"x": 1},
                "scopeSpans": [
                    {
                        "scope": {"name": "s"},
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "parentSpanId": "EEE19B7EC3C1B173",
                                "name": "chat gpt",
                                "kind": 3,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": 1544712661000000000,
                                "attributes": [
                                    {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
                                    {"key": "flag", "value": {"boolValue": True}},
                                ],
                                "unknownSpanField": "ignored",
                            }
                        ],
                    }
                ],
            }
        ]
    }
    response = post(body=json.dumps(document), content_type="application/json; charset=utf-8")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {}
    span = Span.objects.get()
    assert span.trace_id == "5b8efff798038103d269b633813fc60c"
    assert span.span_id == "eee19b7ec3c1b174"
    assert span.parent_span_id == "eee19b7ec3c1b173"
    assert span.start_time_unix_nano == 1544712660000000000
    assert span.attributes == {"gen_ai.usage.input_tokens": 12, "flag": True}
    assert span.resource.service_name == "svc"


def test_tolerates_base64_ids_in_json(post):
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {"traceId": "W47/95gDgQPSabYzgT/GDA==", "spanId": "7uGbfsPBsXQ=", "name": "x"}
                        ]
                    }
                ]
            }
        ]
    }
    response = post(body=json.dumps(document), content_type="application/json")
    assert response.status_code == 200
    span = Span.objects.get()
    assert (span.trace_id, span.span_id) == ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174")


@pytest.mark.parametrize(
    "encoding, compress",
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda data: zlib.compress(data, wbits=-15)),  # raw deflate, as some clients send
    ],
)
def test_decompresses_gzip_and_deflate(post, encoding, compress):
    body = compress(factories.trace_request(spans=2).SerializeToString())
    response = post(body=body, HTTP_CONTENT_ENCODING=encoding)
    assert response.status_code == 200
    assert Span.objects.count() == 2
    assert RawBatch.objects.get().wire_bytes == len(body)


def test_a_gzipped_protobuf_batch_is_stored_as_sent_and_read_back_whole(post):
    request = factories.trace_request(spans=3).SerializeToString()
    # Two gzip members, as a client may send: both are part of the body.
    body = gzip.compress(request[:100]) + gzip.compress(request[100:])
    response = post(body=body, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200
    batch = RawBatch.objects.get()
    assert bytes(batch.body) == body  # not decompressed and compressed again
    assert otlp.stored_request(bytes(batch.body)) == request
    assert Span.objects.count() == 3


def test_a_gzipped_batch_that_was_changed_is_stored_as_the_changed_request(post):
    request = factories.trace_request(spans=1)
    request.resource_spans[0].scope_spans[0].spans[0].name = "mail jane.doe@example.com"  # masked
    body = gzip.compress(request.SerializeToString())
    assert post(body=body, HTTP_CONTENT_ENCODING="gzip").status_code == 200
    batch = RawBatch.objects.get()
    assert batch.redacted == 1
    assert bytes(batch.body) != body and b"jane.doe@example.com" not in otlp.stored_request(bytes(batch.body))


def test_rejects_a_request_without_key(post):
    response = post(body=factories.trace_request().SerializeToString(), key=None)
    assert response.status_code == 401
    assert "missing ingest key" in status_message(response)
    assert_nothing_stored()


def test_accepts_the_key_in_x_ctxview_key(client, key):
    response = client.post(
        "/v1/traces",
        factories.trace_request().SerializeToString(),
        content_type=PROTOBUF,
        HTTP_X_CTXVIEW_KEY=key,
    )
    assert response.status_code == 200


@pytest.mark.parametrize("bad_key", ["nonsense", "cvk_000000000000_secret", "cvk__"])
def test_rejects_an_unknown_key(post, bad_key):
    response = post(body=factories.trace_request().SerializeToString(), key=bad_key)
    assert response.status_code == 401
    assert status_message(response) == "invalid or revoked ingest key"
    assert_nothing_stored()


def test_rejects_a_right_key_id_with_a_wrong_secret(post, key):
    response = post(body=factories.trace_request().SerializeToString(), key=key[:-4] + "AAAA")
    assert response.status_code == 401
    assert_nothing_stored()


def test_rejects_a_revoked_key(post, project):
    project.keys.get().revoke()
    response = post(body=factories.trace_request().SerializeToString())
    assert response.status_code == 401
    assert_nothing_stored()


def test_rejects_an_unknown_content_type(post):
    response = post(body=b"hello", content_type="text/plain")
    assert response.status_code == 415
    assert "send application/x-protobuf or application/json" in status_message(response)
    assert_nothing_stored()


def test_rejects_an_unknown_content_encoding(post):
    response = post(body=b"x", HTTP_CONTENT_ENCODING="br")
    assert response.status_code == 415
    assert "Content-Encoding 'br' is not supported" in status_message(response)


def test_rejects_a_body_over_the_limit(post, settings):
    settings.CTXVIEW_INGEST_MAX_BODY_BYTES = 2000
    response = post(body=factories.trace_request(spans=50).SerializeToString())
    assert response.status_code == 413
    assert "the limit is 2000" in status_message(response)
    assert_nothing_stored()


def test_rejects_a_gzip_bomb_while_inflating(post, settings):
    settings.CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES = 1024 * 1024
    bomb = gzip.compress(b"\0" * (50 * 1024 * 1024))  # 50 MiB of zeros in about 50 KB
    assert len(bomb) < 100_000
    response = post(body=bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert "larger than 1048576 bytes once decompressed" in status_message(response)
    assert_nothing_stored()


def test_rejects_malformed_protobuf_with_a_status_body(post):
    response = post(body=b"\xff\xff\xff\xff garbage")
    assert response.status_code == 400
    assert response["Content-Type"] == PROTOBUF
    assert status_message(response).startswith("body is not a valid protobuf ExportTraceServiceRequest")
    assert_nothing_stored()


def test_rejects_malformed_json_with_a_json_status_body(post):
    response = post(body=b'{"resourceSpans": [', content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == 3
    assert body["message"].startswith("body is not valid JSON")
    assert body["details"][0]["fieldViolations"][0]["description"] == body["message"]
    assert_nothing_stored()


def test_rejects_json_of_the_wrong_shape(post):
    response = post(body=b'{"resourceSpans": {"not": "a list"}}', content_type="application/json")
    assert response.status_code == 400
    assert "JSON body is not a valid ExportTraceServiceRequest" in status_message(response)


def test_rejects_truncated_gzip(post):
    body = gzip.compress(factories.trace_request().SerializeToString())[:-12]
    response = post(body=body, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400
    assert "gzip body is truncated" in status_message(response)


def test_rejects_a_logs_export_sent_to_v1_traces(post):
    # Log records' trace ids land where spans keep attributes; these bytes cannot decode as one.
    response = post(body=factories.logs_request(trace_id=b"\xff" * 16).SerializeToString())
    assert response.status_code == 400
    assert "it parses as a logs export: is it sent to /v1/traces by mistake?" in status_message(response)
    assert_nothing_stored()


def test_rejects_logs_without_ids_sent_to_v1_traces_rather_than_storing_id_less_spans(post):
    request = factories.logs_request()
    for record in request.resource_logs[0].scope_logs[0].log_records:
        record.ClearField("trace_id")
        record.ClearField("span_id")
        record.ClearField("body")
    response = post(body=request.SerializeToString())
    assert response.status_code == 400
    assert "is this a logs export sent to /v1/traces?" in status_message(response)
    assert_nothing_stored()


def test_rejects_a_traces_export_sent_to_v1_logs(post):
    response = post(path="/v1/logs", body=factories.trace_request().SerializeToString())
    assert response.status_code == 400
    assert "it parses as a traces export: is it sent to /v1/logs by mistake?" in status_message(response)
    assert RawBatch.objects.count() == 0


def test_rejects_spans_that_decode_as_untimed_log_records(post):
    request = factories.trace_request()
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.ClearField("name")
        span.attributes.clear()  # what is left decodes as log records, without times
    response = post(path="/v1/logs", body=request.SerializeToString())
    assert response.status_code == 400
    assert "is this a traces export sent to /v1/logs?" in status_message(response)
    assert RawBatch.objects.count() == 0


def test_keeps_valid_spans_and_reports_invalid_ones_as_partial_success(post):
    request = factories.trace_request(spans=5)
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[1].span_id = b"\x01\x02\x03"
    spans[3].trace_id = bytes(16)
    response = post(body=request.SerializeToString())
    assert response.status_code == 200
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(response.content)
    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == (
        "rejected 2 of 5 spans; first: span 'chat model-2': span_id is 3 bytes, not 8"
    )
    assert sorted(Span.objects.values_list("name", flat=True)) == [
        "chat model-1",
        "chat model-3",
        "chat model-5",
    ]
    assert RawBatch.objects.get().rejected_count == 2


def test_reports_partial_success_in_json(post):
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "ok",
                            },
                            {"traceId": "not-an-id", "spanId": "EEE19B7EC3C1B175", "name": "bad"},
                        ]
                    }
                ]
            }
        ]
    }
    response = post(body=json.dumps(document), content_type="application/json")
    assert response.status_code == 200
    assert response.json() == {
        "partialSuccess": {
            "rejectedSpans": "1",
            "errorMessage": "rejected 1 of 2 spans; first: span 'bad': trace_id is 1 bytes, not 16",
        }
    }
    assert list(Span.objects.values_list("name", flat=True)) == ["ok"]


def test_stores_the_same_span_once_when_sent_twice(post):
    body = factories.trace_request(spans=4).SerializeToString()
    assert post(body=body).status_code == 200
    assert post(body=body).status_code == 200
    assert RawBatch.objects.count() == 2
    assert Span.objects.count() == 4


def test_answers_503_with_retry_after_when_the_backlog_is_full(post, project, settings):
    settings.CTXVIEW_INGEST_MAX_PENDING_BATCHES = 1
    RawBatch.objects.create(
        project=project, signal="traces", body=b"", content_type="protobuf", wire_bytes=0, item_count=1
    )
    response = post(body=factories.trace_request().SerializeToString())
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "retry later" in status_message(response)
    assert RawBatch.objects.count() == 1
    assert Span.objects.count() == 0


def test_answers_an_empty_request_without_storing_anything(post):
    # The test client drops Content-Type for an empty body; a real exporter sends it.
    response = post(body=b"", CONTENT_TYPE=PROTOBUF)
    assert response.status_code == 200
    assert_nothing_stored()


def test_refuses_get(client, key):
    response = client.get("/v1/traces", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_stores_log_records(post, project):
    response = post(path="/v1/logs", body=factories.logs_request(records=3).SerializeToString())
    assert response.status_code == 200
    assert LogRecord.objects.filter(project=project).count() == 3
    record = LogRecord.objects.order_by("time_unix_nano").first()
    assert record.event_name == "gen_ai.client.inference.operation.details"
    assert record.body == "record 1"


def test_another_projects_key_writes_into_that_project_only(post, bob):
    other, other_key = factories.project_with_key("beta", owner=bob)
    post(body=factories.trace_request(spans=2).SerializeToString(), key=other_key)
    assert Span.objects.get(span_id="0000000000000001").project == other


def test_refuses_a_chunked_body_the_server_cannot_read_with_411(post):
    # As runserver hands it over: Transfer-Encoding, no Content-Length, no wsgi.input_terminated.
    response = post(body=b"", CONTENT_TYPE=PROTOBUF, HTTP_TRANSFER_ENCODING="chunked")
    assert response.status_code == 411
    assert "send Content-Length" in status_message(response)
    assert_nothing_stored()


def test_answers_503_with_retry_after_when_the_process_holds_too_many_bytes(post, settings):
    settings.CTXVIEW_INGEST_MAX_INFLIGHT_BYTES = 100_000
    raw = factories.trace_request(spans=400).SerializeToString()
    assert len(raw) > 40_000  # more than the budget has left while the other request holds its bytes
    body = gzip.compress(raw)
    with accept.INFLIGHT.hold(60_000):  # another request in flight
        response = post(body=body, HTTP_CONTENT_ENCODING="gzip")
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        assert "too many large requests" in status_message(response)
        assert accept.INFLIGHT.held == 60_000  # the refused request gave back what it held
    assert_nothing_stored()
    assert accept.INFLIGHT.held == 0
    # Alone in flight, the same request passes although it is larger than the budget.
    assert post(body=body, HTTP_CONTENT_ENCODING="gzip").status_code == 200
    assert Span.objects.count() == 400
    assert accept.INFLIGHT.held == 0
