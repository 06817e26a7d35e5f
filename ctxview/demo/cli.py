"""Demo runs from the coding CLIs' real recordings (tests/data/cli): Claude Code in detailed mode,
Codex CLI and Gemini CLI, each export posted again as the CLI sent it (OTLP/JSON)."""

import json
import urllib.request
from pathlib import Path

from django.conf import settings

from ctxview import token_requests

RECORDINGS = ("claude-code-detailed", "codex", "gemini-cli-traces")
SESSION_KEYS = ("session.id", "conversation.id")


def folder() -> Path:
    return Path(settings.BASE_DIR) / "tests" / "data" / "cli"


def session_of(recording: dict) -> str | None:
    """The CLI's session id: the run key its calls get."""
    for export in recording["exports"]:
        for resource_logs in (export["body"] or {}).get("resourceLogs", []):
            for scope_logs in resource_logs.get("scopeLogs", []):
                for record in scope_logs.get("logRecords", []):
                    for attribute in record.get("attributes", []):
                        if attribute["key"] in SESSION_KEYS:
                            return attribute["value"].get("stringValue")
    return None


def send(url: str, key: str, skip: set[str] = frozenset()) -> dict[str, int]:
    """Post each recording whose session is not in ``skip``; returns exports sent per session."""
    sent = {}
    for name in RECORDINGS:
        path = folder() / f"{name}.json"
        if not path.exists():  # an installed copy without the test data
            continue
        recording = json.loads(path.read_text())
        session = session_of(recording)
        if session is None or session in skip:
            continue
        exports = [e for e in recording["exports"] if e["signal"] in ("traces", "logs") and e["body"]]
        for export in exports:
            request = urllib.request.Request(
                f"{url}/v1/{export['signal']}",
                data=json.dumps(export["body"]).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
            )
            with token_requests.urlopen(request, timeout=30):
                pass
        sent[f"{name} ({session})"] = len(exports)
    return sent
