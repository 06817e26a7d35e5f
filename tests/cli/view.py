"""Read a CLI recording (``tests/data/cli/<scenario>.json``) through ctxview's own OTLP decoder.

Pure: no Django. Each export body goes back through ``ingest.otlp.parse_request`` (the receiver's
JSON path) and ``ingest.otlp.spans`` / ``log_records`` (the batch task's), so reading a fixture also
proves ctxview can decode what the CLI sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ingest import otlp

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "cli"


def load(scenario: str, folder: Path = FIXTURES) -> dict[str, Any]:
    return json.loads((folder / f"{scenario}.json").read_text())


def _messages(document: dict[str, Any], signal: str) -> Iterator[Any]:
    for export in document["exports"]:
        if export["signal"] == signal and export["body"] is not None:
            yield otlp.parse_request(signal, json.dumps(export["body"]).encode(), otlp.JSON)


def spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span the CLI exported, as the ingest batch task sees it, with ``resource`` added."""
    return [
        span | {"resource": resource}
        for message in _messages(document, otlp.TRACES)
        for resource, span in otlp.spans(message)
    ]


def logs(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every log record the CLI exported, as the ingest batch task sees it, with ``resource`` added."""
    return [
        record | {"resource": resource}
        for message in _messages(document, otlp.LOGS)
        for resource, record in otlp.log_records(message)
    ]


def named(items: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Spans with this name, or log records with this event name (attribute or field)."""
    return [
        item
        for item in items
        if item.get("name") == name
        or item.get("event_name") == name
        or item.get("attributes", {}).get("event.name") == name
    ]


def model_requests(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The requests the fake answered with a model reply (scripted or not), in arrival order."""
    return [request for request in document["provider"]["requests"] if request["usage"] is not None]


def scripted(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The fake's model requests that a scripted step answered, by step name."""
    return {request["step"]: request for request in model_requests(document) if request["step"]}
