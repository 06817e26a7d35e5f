"""``ctxview check`` benchmark: how long checking a 100-call run takes (issue 34: under a second,
Python's own start-up aside).

    .venv/bin/python bench/check.py              # 100 calls, 7 repetitions
    .venv/bin/python bench/check.py --calls 300 --repeat 5

The run is the demo's migration story stretched to ``--calls`` calls (its date line and key-order
regressions included), recorded through the ctxview SDK and written as one gzipped OTLP protobuf
request, as the OTLP/HTTP exporter sends it. Each repetition is a fresh process, as in CI:

- "start-up": importing the command, Django, ingest and Celery, and configuring Django (what any run of
  ``ctxview check`` pays before it reads a file);
- "check": the check itself: the files read, the database made in memory, the pipeline, the analyses,
  the runs read back, the rules and the report;
- "both" (their sum) and "process", the whole ``ctxview check`` process as a shell runs it; "python",
  an interpreter that starts and does nothing.

Medians and minima. On a busy machine every figure stretches: compare figures of one run of the bench.
"""

import argparse
import gzip
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TIMED = """
import sys, time
started = time.perf_counter()
from ctxview.check import engine
from ctxview.cli import main
engine.configure()
configured = time.perf_counter()
code = main(["check", sys.argv[1], "--fail-on-cause", "any"])
print(configured - started, time.perf_counter() - configured, code, file=sys.stderr)
"""


def record(calls: int, path: Path) -> int:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import ctxview_sdk
    from ctxview.demo import migration

    memory = InMemorySpanExporter()
    ctxview_sdk.configure(
        service_name=migration.SERVICE, send_content=True, content_limit=65536, _exporter=memory
    )
    migration.STEPS = calls
    migration.record()
    ctxview_sdk.flush(timeout=60.0)
    ctxview_sdk.shutdown()
    spans = memory.get_finished_spans()
    path.write_bytes(gzip.compress(encode_spans(spans).SerializeToString()))
    return len(spans)


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=False, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "run.pb.gz"
        spans = record(args.calls, path)
        size = path.stat().st_size
        python = Path(sys.executable)
        startups, checks, both, processes, starts = [], [], [], [], []
        for _ in range(args.repeat):
            done = subprocess.run([python, "-c", TIMED, path], capture_output=True, text=True, check=False)
            startup, check, code = done.stderr.split()[-3:]
            assert code == "1", done.stderr  # the story breaks its cache: the rule fails, as it should
            startups.append(float(startup))
            checks.append(float(check))
            both.append(float(startup) + float(check))
            processes.append(
                timed([str(python.parent / "ctxview"), "check", str(path), "--fail-on-cause", "any"])
            )
            starts.append(timed([str(python), "-c", "pass"]))
    print(
        f"ctxview check of a {spans}-call run ({size / 1e6:.1f} MB of gzipped OTLP), {args.repeat} processes:"
    )
    figures = (
        ("start-up", startups),
        ("check", checks),
        ("both", both),
        ("process", processes),
        ("python", starts),
    )
    for name, values in figures:
        print(f"  {name:8} median {statistics.median(values):.3f} s   min {min(values):.3f} s")


if __name__ == "__main__":
    main()
