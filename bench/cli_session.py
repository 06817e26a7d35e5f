"""What a long coding-CLI session costs per batch: each batch reassembles its whole session.

    .venv/bin/python bench/cli_session.py [--requests 400] [--per-batch 4]

A Claude Code session in default mode (api_request log records only), made from the recorded record
(tests/data/cli/claude-code-default.json) with new request ids 6 s apart, a new prompt every 10 requests, sent
``--per-batch`` records per export as Claude Code batches them. Each batch is processed with tasks
in-process (its analysis included) on a throwaway PostgreSQL database; prints the wall time per batch at
the start and at the end of the session.
"""

import argparse
import copy
import json
import statistics
import sys
import time
import zlib
from pathlib import Path

from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bodies(requests: int, per_batch: int) -> list[bytes]:
    from ingest import otlp

    recording = json.loads((ROOT / "tests/data/cli/claude-code-default.json").read_text())
    template = resource = None
    for export in recording["exports"]:
        for resource_logs in export["body"].get("resourceLogs", []):
            for scope_logs in resource_logs["scopeLogs"]:
                for record in scope_logs["logRecords"]:
                    names = {a["key"]: a["value"] for a in record["attributes"]}
                    if names.get("event.name", {}).get("stringValue") == "api_request" and template is None:
                        template, resource = (record, scope_logs["scope"]), resource_logs["resource"]
    record, scope = template
    start = int(record["timeUnixNano"])
    found = []
    for first in range(0, requests, per_batch):
        records = []
        for index in range(first, min(first + per_batch, requests)):
            copied = copy.deepcopy(record)
            copied["timeUnixNano"] = str(start + index * 6_000_000_000)
            for attribute in copied["attributes"]:
                if attribute["key"] == "request_id":
                    attribute["value"] = {"stringValue": f"req_bench_{index:06d}"}
                elif attribute["key"] == "prompt.id":
                    attribute["value"] = {"stringValue": f"prompt-{index // 10}"}
            records.append(copied)
        scope_logs = [{"scope": scope, "logRecords": records}]
        body = {"resourceLogs": [{"resource": resource, "scopeLogs": scope_logs}]}
        found.append(otlp.parse_request(otlp.LOGS, json.dumps(body).encode(), otlp.JSON).SerializeToString())
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--per-batch", type=int, default=4)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with django_in_process(args.database_url):
        from ingest import store
        from ingest.models import Project, RawBatch, Run
        from ingest.tasks import enqueue_analysis

        project = Project.objects.create(slug="bench", name="bench")
        times = []
        for body in bodies(args.requests, args.per_batch):
            batch = RawBatch.objects.create(
                project=project,
                signal="logs",
                body=zlib.compress(body, 1),
                content_type="protobuf",
                wire_bytes=len(body),
                item_count=args.per_batch,
            )
            began = time.perf_counter()
            assert store.process_batch(batch.id, then=enqueue_analysis) == "done"
            times.append((time.perf_counter() - began) * 1000)
        run = Run.objects.get()
        assert (run.call_count, run.analysed_seq) == (args.requests, args.requests)
        tenth = max(1, len(times) // 10)
        print(
            f"{args.requests} requests in {len(times)} batches: "
            f"first tenth {statistics.median(times[:tenth]):.1f} ms/batch, "
            f"last tenth {statistics.median(times[-tenth:]):.1f} ms/batch (medians), "
            f"total {sum(times) / 1000:.1f} s"
        )


if __name__ == "__main__":
    main()
