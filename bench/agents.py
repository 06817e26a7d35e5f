"""What resolving agents and sessions costs at ingest: one long multi-agent run in ONE trace (the worst
case: every batch resolves the whole trace again), as pydantic-ai delegation sends it.

    .venv/bin/python bench/agents.py [--turns 300] [--batch 64]

Each turn: ``invoke_agent planner`` (conversation C1) with a chat, an ``execute_tool`` holding
``invoke_agent expert`` (its own conversation id, as pydantic-ai gives a child run) with two chats, and
the planner's last chat: 8 spans, 4 calls. Spans are sent in the order they end (children first), in
batches of ``--batch``; each batch is processed with ``process_batch`` (tasks in-process, so the
analyses run too). Prints ms of this process's CPU plus its PostgreSQL backend's per span, for the first
and the last tenth of the run (equal: the cost does not grow with the trace), and checks the outcome.
"""

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from payloads import attribute
from pipeline import backend_cpu
from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TRACE = os.urandom(16)


def turn_spans(turn: int, start: int) -> list[dict]:
    """One turn's spans in the order they end; ids are unique per turn."""

    def span_id(n: int) -> bytes:
        return (turn * 16 + n + 1).to_bytes(8, "big")

    def chat(n, parent, conversation, agent, at):
        asked = f"turn {turn}" if agent == "planner" else f"turn {turn}: ask the expert"
        messages = [{"role": "user", "parts": [{"type": "text", "content": asked}]}]
        return {
            "id": span_id(n),
            "parent": span_id(parent),
            "name": "chat m",
            "start": at,
            "attributes": {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.conversation.id": conversation,
                "gen_ai.agent.name": agent,
                "gen_ai.usage.input_tokens": 1000 + n,
                "gen_ai.usage.output_tokens": 50,
                "gen_ai.input.messages": json.dumps(messages),
            },
        }

    def agent(n, parent, name, conversation, at):
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        attributes["gen_ai.conversation.id"] = conversation
        return {
            "id": span_id(n),
            "parent": span_id(parent) if parent is not None else b"",
            "name": name,
            "start": at,
            "attributes": attributes,
        }

    child = f"child-{turn}"
    return [
        chat(1, 0, "C1", "planner", start + 1),
        chat(4, 3, child, "expert", start + 4),
        chat(5, 3, child, "expert", start + 5),
        agent(3, 2, "expert", child, start + 3),
        {
            "id": span_id(2),
            "parent": span_id(0),
            "name": "execute_tool ask",
            "start": start + 2,
            "attributes": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask"},
        },
        chat(6, 0, "C1", "planner", start + 6),
        agent(0, None, "planner", "C1", start),
        {"id": span_id(7), "parent": b"", "name": "other", "start": start + 7, "attributes": {}},
    ]


def batches(turns: int, size: int) -> list[bytes]:
    spans = [
        span for turn in range(turns) for span in turn_spans(turn, 1_700_000_000_000_000_000 + turn * 100)
    ]
    bodies = []
    for offset in range(0, len(spans), size):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        scope.scope.name = "pydantic-ai"
        for entry in spans[offset : offset + size]:
            span = scope.spans.add()
            span.trace_id, span.span_id, span.parent_span_id = TRACE, entry["id"], entry["parent"]
            span.name, span.kind = entry["name"], 1
            span.start_time_unix_nano, span.end_time_unix_nano = entry["start"], entry["start"] + 50
            span.attributes.extend(attribute(key, value) for key, value in entry["attributes"].items())
        bodies.append(request.SerializeToString())
    return bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with django_in_process(args.database_url):
        from django.db import connection

        from ingest import store
        from ingest.models import Call, Project, RawBatch, Run
        from ingest.tasks import enqueue_analysis

        project = Project.objects.create(slug="bench", name="bench")
        bodies = batches(args.turns, args.batch)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = cursor.fetchone()[0]
        costs = []
        for body in bodies:
            batch = RawBatch.objects.create(
                project=project,
                signal="traces",
                body=zlib.compress(body, 1),
                content_type="protobuf",
                wire_bytes=len(body),
                item_count=args.batch,
            )
            before = (time.process_time(), backend_cpu(backend))
            assert store.process_batch(batch.id, then=enqueue_analysis) == "done"
            costs.append((time.process_time() - before[0]) + (backend_cpu(backend) - before[1]))
        tenth = max(1, len(costs) // 10)
        per_span = [sum(part) * 1000 / (len(part) * args.batch) for part in (costs[:tenth], costs[-tenth:])]
        run = Run.objects.get(project=project, key="C1")
        sessions = Run.objects.filter(project=project, started_at__isnull=False).count()
        print(
            f"{args.turns * 8} spans, {args.turns * 4} calls in one trace; ms/span first tenth "
            f"{per_span[0]:.2f}, last tenth {per_span[1]:.2f}; sessions {sessions}, session calls "
            f"{run.call_count}, turns {run.turn_count}, delegated calls "
            f"{Call.objects.filter(run=run, agent_entry='delegation').count()}"
        )


if __name__ == "__main__":
    main()
