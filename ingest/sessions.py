"""The coding CLIs' calls, assembled per session from stored spans and log records. No Django here.

A family with ``sessions`` (``ingest/families/``: Claude Code, Codex, Gemini CLI) turns every row of
one session into its calls; this module makes them call records like any span's, with the CLI's turn
and its own reported figures kept beside ours. Pure: ``ingest.session_calls`` feeds it stored rows,
the tests feed it recordings.
"""

from dataclasses import replace

from ctxcore.vocabulary import digest
from ingest import normalise
from ingest.families import Family
from ingest.records import CallRecord, TokenCounter

REPORTED_PREFIX = "reported."  # the CLI's own figures in usage_raw, e.g. reported.cost_usd


def session_of(family: Family, signal: str, row: dict) -> str | None:
    """The session a stored row belongs to, when this family assembles calls from it."""
    sessions = family.sessions
    assert sessions is not None
    attributes = row["attributes"]
    # Attribute values are untrusted: an event name may be a list or a map, which no set holds.
    if signal == "logs":
        event = attributes.get("event.name")
        wanted = isinstance(event, str) and event in sessions.log_events
        key = attributes.get(sessions.log_key)
    else:
        wanted = isinstance(row["name"], str) and row["name"] in sessions.span_names
        key = attributes.get(sessions.span_key)
    if wanted and isinstance(key, str) and key.strip():
        return key.strip()[:200]
    return None


def records(
    family: Family,
    spans: list[dict],
    logs: list[dict],
    count: TokenCounter = normalise._count_tokens,
    since_ns: int | None = None,
) -> list[CallRecord]:
    """The session's calls as call records, in the family's order; with ``since_ns``, only the calls that
    end at or after it (assembling is cheap, making records is not)."""
    sessions = family.sessions
    assert sessions is not None
    found = []
    for call in sessions.assemble(spans, logs):
        if since_ns is not None and call.row["end_time_unix_nano"] < since_ns:
            continue
        record = normalise.call_record(call.row, call.resource, [], count)
        notes = [note for note in record.notes if not note.startswith("content was not captured")]
        if not record.content_captured and sessions.no_content_note:
            notes.append(sessions.no_content_note)
        usage = record.usage
        raw = {**usage.raw, **{REPORTED_PREFIX + key: value for key, value in call.reported.items()}}
        found.append(
            replace(
                record,
                # The CLI's own turn, not the last user message: a subagent's prompt is no new turn.
                user_fingerprint=digest(call.turn_key) if call.turn_key else None,
                usage=replace(usage, raw=raw),
                notes=tuple(notes),
                moved_keys=(),
            )
        )
    return found
