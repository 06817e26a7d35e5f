"""Web memory under concurrent gzip bombs: what the per-process budget of body bytes in flight buys.

    .venv/bin/python bench/inflight.py                     # 8 clients x one 60 MB attribute, gzipped
    .venv/bin/python bench/inflight.py --clients 8 --mb 60 --inflight-bytes 0

A throwaway ctxview (PostgreSQL, one Celery worker, one gunicorn worker with 8 threads). Each client
POSTs, all at once, a gzip body of ~61 KB: one valid span whose attribute is ``--mb`` MB of one letter.
Prints the answers and the gunicorn worker's peak RSS (VmHWM) over its RSS before the attack.
``--inflight-bytes`` sets CTXVIEW_INGEST_MAX_INFLIGHT_BYTES (0: the default).
"""

import argparse
import gzip
import os
import threading
import time
from collections import Counter

import requests
from servers import throwaway_ctxview


def bomb(megabytes: int) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = os.urandom(16), os.urandom(8), "chat bomb"
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    attribute = span.attributes.add()
    attribute.key = "gen_ai.input.messages"
    attribute.value.string_value = "a" * (megabytes * 1_000_000)
    return gzip.compress(request.SerializeToString(), 9)


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def gunicorn_worker(master_pid: int) -> int:
    children = open(f"/proc/{master_pid}/task/{master_pid}/children").read().split()
    assert len(children) == 1, children
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--mb", type=int, default=60)
    parser.add_argument("--inflight-bytes", type=int, default=0)
    arguments = parser.parse_args()
    bodies = [bomb(arguments.mb) for _ in range(arguments.clients)]
    if arguments.inflight_bytes:
        os.environ["CTXVIEW_INGEST_MAX_INFLIGHT_BYTES"] = str(arguments.inflight_bytes)
    with throwaway_ctxview("postgres", workers=1, web_workers=1, web_threads=8) as app:
        worker = gunicorn_worker(app.web_pgid)
        # Warm up the worker thread pool and imports with one small export.
        requests.post(app.traces_url, data=bomb(1), headers=headers(app.key), timeout=60)
        before = status_kib(worker, "VmRSS")
        answers: Counter = Counter()
        start = threading.Barrier(arguments.clients)

        def client(body: bytes) -> None:
            start.wait()
            response = requests.post(app.traces_url, data=body, headers=headers(app.key), timeout=300)
            answers[f"{response.status_code} Retry-After={response.headers.get('Retry-After')}"] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(body,)) for body in bodies]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seconds = time.monotonic() - started
        peak = status_kib(worker, "VmHWM")
        print(
            f"{arguments.clients} x {len(bodies[0]) / 1000:.0f} KB gzip ({arguments.mb} MB inside), "
            f"in {seconds:.1f} s: {dict(answers)}; web worker RSS before {before / 1024:.0f} MiB, "
            f"peak {peak / 1024:.0f} MiB, rise {(peak - before) / 1024:.0f} MiB"
        )


def headers(key: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "gzip",
    }


if __name__ == "__main__":
    main()
