"""What ``ctxview check`` reads (ctxview/check/inputs.py): exports written by the OpenTelemetry SDK's own
encoders, as files of each shape the command takes."""

import gzip
import json

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

from ctxview.check.inputs import Unusable, read_file, read_paths
from ingest import otlp
from tests import otel
from tests.check import stories


def test_a_protobuf_logs_export_is_read_as_logs(tmp_path):
    path = tmp_path / "logs.pb.gz"
    path.write_bytes(gzip.compress(encode_logs(otel.content_log_records(3)).SerializeToString()))
    [export] = read_file(path)
    assert (export.source, export.signal, export.rejected) == (str(path), otlp.LOGS, 0)
    assert len(export.message.resource_logs[0].scope_logs[0].log_records) == 3


def test_json_lines_of_a_file_exporter_keep_traces_and_logs_and_skip_metrics(tmp_path):
    spans = stories.write_json_lines(tmp_path / "spans.jsonl", otel.agent_spans(calls=3), per_line=2)
    logs = encode_logs(otel.content_log_records(1))
    metrics = '{"resourceMetrics": [{"scopeMetrics": []}]}'
    path = tmp_path / "collector.json"  # the Collector's file exporter writes lines into a .json file
    path.write_text(
        spans.read_text() + metrics + "\n\n" + json_format.MessageToJson(logs, indent=None) + "\n"
    )
    exports = read_file(path)
    assert [(export.source, export.signal) for export in exports] == [
        (f"{path}:1", otlp.TRACES),
        (f"{path}:2", otlp.TRACES),
        (f"{path}:5", otlp.LOGS),
    ]


def test_an_indented_json_document_is_one_export(tmp_path):
    flat = stories.write_json(tmp_path / "flat.json", otel.agent_spans(calls=2))
    path = tmp_path / "request.json"
    path.write_text(json.dumps(json.loads(flat.read_text()), indent=2))
    [export] = read_file(path)
    assert export.signal == otlp.TRACES
    assert len(export.message.resource_spans[0].scope_spans[0].spans) == 3


def test_a_folder_is_read_in_name_order_and_other_files_are_left(tmp_path):
    spans = otel.agent_spans(calls=2)
    (tmp_path / "b").mkdir()
    stories.write_protobuf(tmp_path / "b" / "2.pb", spans)
    stories.write_json(tmp_path / "a.json", spans)
    (tmp_path / "README.md").write_text("not an export")
    assert [export.source for export in read_paths([str(tmp_path)])] == [
        str(tmp_path / "a.json"),
        str(tmp_path / "b" / "2.pb"),
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Unusable, match=f"^{empty}: no OTLP files in this folder"):
        read_paths([str(empty)])


def test_a_document_holding_exports_deeper_down_is_no_export(tmp_path):
    # As the coding-CLI recordings of tests/data/cli do: the exports under "turns", among other keys.
    path = tmp_path / "recording.json"
    export = {"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab" * 16, "spanId": "cd" * 8}]}]}]}
    path.write_text(json.dumps({"scenario": "x", "turns": [{"exports": [export]}]}))
    with pytest.raises(Unusable, match=r"top level has scenario, turns, not resourceSpans or resourceLogs"):
        read_file(path)


def test_a_json_array_is_no_export(tmp_path):
    path = tmp_path / "spans.json"
    path.write_text("[1, 2]")
    with pytest.raises(Unusable, match=r"not an OTLP/JSON export \(an object with resourceSpans"):
        read_file(path)
