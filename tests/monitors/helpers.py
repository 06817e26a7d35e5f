"""What the monitors' tests share: runs of chat spans sent through the receiver, and the roll-ups
recomputed from the stored calls."""

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxcore.analysis import accounting, price_for
from ingest.analyse import call_input, config_for
from ingest.models import Finding, Run
from ingest.rollups import SEGMENT, contribution, empty, merge, minute_of
from tests import factories
from tests.factories import assistant_message, user_message

START = 1_764_000_000_000_000_000
RULES = " Follow the runbook. " * 200


def system_prompt(run: int, number: int, changed_at: int | None, volatile_from: int | None) -> str:
    """The run's system prompt at call ``number``: changed once at ``changed_at``; from ``volatile_from``
    on a time line that differs at every call (a volatile line)."""
    text = f"You are agent {run}." + (" Be brief." if changed_at and number >= changed_at else "")
    if volatile_from and number >= volatile_from:
        text += f" Current time: 2026-05-01T10:{number // 60:02d}:{number % 60:02d}Z."
    return text + RULES


def run_spans(
    run: int, calls: int, changed_at=None, volatile_from=None, start=START, model="m1"
) -> list[dict]:
    """chat_span keyword arguments of a run's calls, in order (a minute apart every 7 calls)."""
    found, history = [], [user_message(f"Task {run}: find why service {run} is slow. " * 20)]
    for number in range(1, calls + 1):
        if number > 1:
            history = history + [
                assistant_message(f"Step {number - 1} done."),
                user_message(f"Next {number}?"),
            ]
        prompt = 3000 + 200 * number
        found.append(
            {
                "trace_id": bytes([run + 1]) * 16,
                "number": number,
                "messages": list(history),
                "start": start + number * 9 * 10**9 + run * 10**6,
                "attributes": {
                    "gen_ai.conversation.id": f"monitors-{run}",
                    "gen_ai.request.model": model,
                    "gen_ai.system_instructions": json.dumps(
                        [{"type": "text", "content": system_prompt(run, number, changed_at, volatile_from)}]
                    ),
                    "gen_ai.usage.input_tokens": prompt,
                    "gen_ai.usage.cache_read.input_tokens": 0 if number == 1 else prompt - 600,
                    "gen_ai.usage.cache_creation.input_tokens": 600 if number > 1 else prompt,
                    "gen_ai.usage.output_tokens": 40 + number,
                    # Every other run states its context limit (Sentry's convention): a window's share of it.
                    **({"gen_ai.context.window_size": 200_000} if run % 2 else {}),
                },
            }
        )
    return found


def request_of(spans: list[dict]) -> bytes:
    request = ExportTraceServiceRequest()
    for arguments in spans:
        factories.chat_span(request, **arguments)
    return request.SerializeToString()


def post(client, key: str, body: bytes) -> None:
    response = client.post(
        "/v1/traces", body, content_type="application/x-protobuf", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content


def recomputed(project) -> dict[tuple, dict]:
    """The roll-ups as a recomputation from the stored, analysed calls gives them."""
    config = config_for(project)
    rows: dict[tuple, dict] = {}
    for run in Run.objects.filter(project=project):
        findings: dict[int, list[dict]] = {}
        for finding in Finding.objects.filter(run=run, call_seq__isnull=False):
            findings.setdefault(finding.call_seq, []).append(
                {"type": finding.type, "item_id": finding.item_id}
            )
        for call in run.calls.filter(seq__isnull=False, seq__lte=run.analysed_seq).order_by("seq"):
            entry = call_input(call)
            cost = accounting.call_cost(entry, price_for(entry.model, config.prices))
            kinds = {item["id"]: item.get("kind") for item in call.full_items()}
            value = contribution(
                call, call.analysis["cache"], call.window_total, findings.get(call.seq, []), cost, kinds
            )
            key = (
                run.id,
                (call.seq - 1) // SEGMENT,
                minute_of(call.start_ns),
                run.service_name,
                call.model,
                call.agent_name,
            )
            merge(rows.setdefault(key, empty()), value)
    return rows


def stored(project) -> dict[tuple, dict]:
    from ingest.rollups import Rollup, values_of

    return {
        (row.run_id, row.segment, row.minute, row.service, row.model, row.agent): values_of(row)
        for row in Rollup.objects.filter(project=project)
    }


def rounded(rows: dict[tuple, dict]) -> dict[tuple, dict]:
    """Floats to 9 places (sums added in another order), for comparing."""

    def fix(value):
        if isinstance(value, float):
            return round(value, 9)
        if isinstance(value, dict):
            return {key: fix(entry) for key, entry in value.items()}
        return value

    return {key: fix(value) for key, value in rows.items()}
