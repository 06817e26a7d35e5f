"""What ``ctxview check`` reads: OTLP exports from files and folders, decoded as the receiver decodes
them. No Django here.

A path is an OTLP/HTTP request body (``.pb`` protobuf or ``.json`` OTLP/JSON, gzipped or not), a
JSON-lines file as the OpenTelemetry file exporters write it (one ``Export*ServiceRequest`` per line:
``.jsonl``, ``.ndjson``, or a ``.json`` holding more than one document), or a folder of them. Every
export is parsed and validated with ``ingest.otlp``, the receiver's own decoding, before anything is
stored; a file that cannot be read is an ``Unusable`` naming the file and what is wrong with it.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import Message

from ingest import otlp

PROTOBUF_SUFFIXES = (".pb", ".bin", ".protobuf")
JSON_SUFFIXES = (".json",)
LINES_SUFFIXES = (".jsonl", ".ndjson")
SUFFIXES = (*PROTOBUF_SUFFIXES, *JSON_SUFFIXES, *LINES_SUFFIXES)
# What a gzipped file may inflate to (a gzip bomb stays bounded). Far above the receiver's limit of a
# request (64 MB once decompressed): a JSON-lines file holds many requests.
MAX_FILE_BYTES = 1024 * 1024 * 1024


class Unusable(Exception):
    """Input ``ctxview check`` cannot read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Export:
    """One validated export (``otlp.TRACES`` or ``otlp.LOGS``) and where it was read."""

    source: str  # the file, and the line for JSON lines
    signal: str
    message: Message
    rejected: int = 0
    problem: str = ""  # why spans or records were rejected


def read_paths(paths: list[str]) -> list[Export]:
    """Every export of ``paths`` (folders walked in name order), in order."""
    exports: list[Export] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = sorted(
                found for found in path.rglob("*") if found.is_file() and _suffix(found) in SUFFIXES
            )
            if not files:
                raise Unusable(f"{name}: no OTLP files in this folder (looked for {', '.join(SUFFIXES)})")
            for found in files:
                exports.extend(read_file(found))
        elif path.exists():
            exports.extend(read_file(path))
        else:
            raise Unusable(f"{name}: no such file or folder")
    return exports


def read_file(path: Path) -> list[Export]:
    """The exports of one file, decompressed if it is gzipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise Unusable(f"{path}: cannot be read ({exc.strerror})") from None
    if raw[:2] == otlp.GZIP_MAGIC:
        try:
            raw = otlp.decompress(raw, "gzip", MAX_FILE_BYTES)
        except otlp.OtlpError as exc:
            raise Unusable(f"{path}: {exc.message}") from None
    if not raw.strip():
        raise Unusable(f"{path}: the file is empty")
    suffix = _suffix(path)
    if suffix in PROTOBUF_SUFFIXES or (suffix not in SUFFIXES and not _looks_like_json(raw)):
        exports = [_protobuf(str(path), raw)]
    elif suffix in LINES_SUFFIXES or _several_documents(raw):
        # OTel file exporters (the Collector's among them) write one request per line, into .json too.
        exports = [_json(f"{path}:{number}", line) for number, line in enumerate(raw.splitlines(), 1)]
    else:
        exports = [_json(str(path), raw)]
    found = [export for export in exports if export is not None]
    if not found:
        raise Unusable(f"{path}: an OTLP export with no spans or log records")
    return found


def _suffix(path: Path) -> str:
    """The suffix that says the format: ``traces.pb.gz`` is ``.pb``."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _looks_like_json(raw: bytes) -> bool:
    """A file named otherwise: JSON when it is text that opens an object (protobuf is rarely UTF-8)."""
    if raw.lstrip()[:1] != b"{":
        return False
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def _several_documents(raw: bytes) -> bool:
    """Whether a JSON file holds one document per line (not one document, however it is indented)."""
    lines = [line for line in raw.splitlines() if line.strip()]
    return len(lines) > 1 and lines[0].rstrip().endswith(b"}") and lines[1].lstrip().startswith(b"{")


# The first key of an export says its signal; exporters write it first. A line of metrics is skipped.
_SIGNAL_KEYS = {
    b'"resourceSpans"': otlp.TRACES,
    b'"resource_spans"': otlp.TRACES,
    b'"resourceLogs"': otlp.LOGS,
    b'"resource_logs"': otlp.LOGS,
    b'"resourceMetrics"': None,
    b'"resource_metrics"': None,
    b'"resourceProfiles"': None,
}
_SIGNAL_NAMES = {key.decode().strip('"') for key in _SIGNAL_KEYS}


def _json(source: str, data: bytes) -> Export | None:
    if not data.strip():
        return None
    if data.lstrip()[:1] != b"{":
        raise Unusable(f"{source}: not an OTLP/JSON export (an object with resourceSpans or resourceLogs)")
    found = {data.find(key): signal for key, signal in _SIGNAL_KEYS.items() if key in data}
    if not found:
        if data.strip() == b"{}":
            return None
        raise Unusable(f"{source}: not an OTLP/JSON export (no resourceSpans or resourceLogs)")
    signal = found[min(found)]
    export = None if signal is None else _decoded(source, signal, data, otlp.JSON)
    if export is None:
        _refuse_nested_export(source, data)
    return export


def _refuse_nested_export(source: str, data: bytes) -> None:
    """A JSON document that holds an export's keys only deeper down (a recording that keeps exports among
    other things) is not an export: say so, rather than "no spans"."""
    try:
        document = json.loads(data)
    except ValueError:
        return  # the decoder has already said what is wrong, or found an empty export
    if isinstance(document, dict) and not _SIGNAL_NAMES & document.keys():
        top = ", ".join(sorted(document)[:6]) + (", …" if len(document) > 6 else "")
        raise Unusable(
            f"{source}: not an OTLP/JSON export: its top level has {top}, not resourceSpans or resourceLogs"
        )


def _protobuf(source: str, raw: bytes) -> Export | None:
    try:
        return _decoded(source, otlp.TRACES, raw, otlp.PROTOBUF)
    except Unusable as traces_problem:
        # A protobuf body does not say its signal; a logs export decodes as id-less spans.
        try:
            return _decoded(source, otlp.LOGS, raw, otlp.PROTOBUF)
        except Unusable:
            raise traces_problem from None


def _decoded(source: str, signal: str, data: bytes, fmt: str) -> Export | None:
    try:
        decoded = otlp.validate(signal, otlp.parse_request(signal, data, fmt))
    except otlp.OtlpError as exc:
        raise Unusable(f"{source}: {exc.message}") from None
    if not decoded.accepted and not decoded.rejected:
        return None
    return Export(source, signal, decoded.message, decoded.rejected, decoded.error_message)
