"""Search query times on PostgreSQL for a project with 10,000 runs.

    .venv/bin/python bench/search.py [--runs 10000] [--calls 5] [--database-url postgres://postgres@127.0.0.1:5432/postgres]

Creates a throwaway database, fills it with runs whose calls carry realistic manifests (tools, system,
messages, files with sources and versions), findings and labels, then times GET /api/v1/runs with each
search filter (median of 5, in-process, through the real view) and prints the plans' index use.
"""

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from servers import django_in_process

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def fill(runs: int, calls_per_run: int) -> dict:
    from ctxcore.vocabulary import digest
    from ctxview.models import Label
    from ingest import itemlists
    from ingest.keys import create_key
    from ingest.models import Call, Finding, Project, Run

    project = Project.objects.create(slug="bench", name="bench")
    key = create_key(project)
    rng = random.Random(10_000)
    files = [
        f"src/{area}/{name}.ts"
        for area in ("api", "lib", "jobs", "db")
        for name in ("billing", "orders", "users", "auth", "cache", "queue", "ledger", "retry")
    ]
    start = datetime(2026, 11, 1, tzinfo=UTC)
    finding_types = (
        "cache_invalidated",
        "fact_dropped",
        "conflicting_versions",
        "lost_in_middle",
        "unused_tools",
    )
    wanted = {}
    for first in range(0, runs, 500):
        batch = [
            Run(
                project=project,
                key=f"run-{number}",
                key_source="ctxview.run.id",
                service_name=f"svc-{number % 7}",
                started_at=start + timedelta(minutes=number),
                last_call_at=start + timedelta(minutes=number),
                call_count=calls_per_run,
                turn_count=calls_per_run,
                model_names=["claude-sonnet-4-5"],
            )
            for number in range(first, min(first + 500, runs))
        ]
        Run.objects.bulk_create(batch)
        calls, findings, labels = [], [], []
        for run in batch:
            number = int(run.key.split("-")[1])
            items = [
                {"id": f"tool:t{n}", "kind": "tool", "bucket": "tools", "hash": digest(f"tool{n}")}
                for n in range(8)
            ]
            items.append({"id": "system:0", "kind": "system", "bucket": "system", "hash": digest("system")})
            for seq in range(1, calls_per_run + 1):
                items = items + [
                    {
                        "id": f"msg:{number}-{seq}",
                        "kind": "message",
                        "bucket": "conversation",
                        "role": "user",
                        "hash": digest(f"{number}-{seq}"),
                    }
                ]
                path = rng.choice(files)
                version = f"v{rng.randint(1, 40)}"
                file_item = {
                    "id": f"file:{path}@{version}",
                    "kind": "file",
                    "bucket": "retrieved",
                    "source": path,
                    "version": version,
                    "hash": digest(f"{path}{version}"),
                }
                calls.append(
                    Call(
                        project=project,
                        run=run,
                        trace_id=f"{number:032x}",
                        span_id=f"{seq:016x}",
                        seq=seq,
                        turn=seq,
                        start_ns=int((start + timedelta(minutes=number, seconds=seq)).timestamp() * 1e9),
                        end_ns=0,
                        started_at=start + timedelta(minutes=number, seconds=seq),
                        provider="anthropic",
                        request_model="claude-sonnet-4-5",
                        manifest_source="derived",
                        items=[*items, file_item],
                    )
                )
                wanted.setdefault("source", (path, version))
                wanted["hash"] = file_item["hash"]
            if number % 10 == 0:
                findings.append(
                    Finding(
                        project=project,
                        run=run,
                        call_seq=2,
                        type=rng.choice(finding_types),
                        severity="warning",
                    )
                )
            if number % 50 == 0:
                labels.append(Label(project=project, run=run, name="incident"))
        itemlists.store(project.id, calls)
        Call.objects.bulk_create(calls, batch_size=1000)
        Finding.objects.bulk_create(findings)
        Label.objects.bulk_create(labels)
    return {"key": key, **wanted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()

    with django_in_process(args.database_url):
        from django.db import connection
        from django.test import Client

        started = time.perf_counter()
        data = fill(args.runs, args.calls)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        elapsed = time.perf_counter() - started
        print(f"{args.runs} runs, {args.runs * args.calls} calls filled in {elapsed:.0f} s")
        client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {data['key']}")
        path, version = data["source"]
        queries = {
            "source + version": f"source={path}&version={version}",
            "content hash": f"hash={data['hash']}",
            "item id": "item=msg:4242-3",
            "finding type": "finding=fact_dropped",
            "label": "label=incident",
            "service + time": "service=svc-3&since=2026-11-03T00:00:00Z&until=2026-11-05T00:00:00Z",
            "model": "model=claude-sonnet-4-5",
            "no filter (newest 50)": "",
        }
        print(f"{'query':26}{'median ms':>10}{'runs on page':>14}")
        for label, query in queries.items():
            times = []
            for _ in range(5):
                begin = time.perf_counter()
                response = client.get(f"/api/v1/runs?{query}")
                times.append((time.perf_counter() - begin) * 1000)
                assert response.status_code == 200, response.content
            print(f"{label:26}{statistics.median(times):>10.1f}{len(response.json()['runs']):>14}")


if __name__ == "__main__":
    main()
