"""The benchmark suite: one command, one report (Markdown tables).

    .venv/bin/python bench/suite.py                              # make bench
    .venv/bin/python bench/suite.py --phoenix /tmp/phoenix-venv  # the same load sent to Arize Phoenix too
    .venv/bin/python bench/suite.py --endpoint http://127.0.0.1:4318/v1/traces --key KEY  # any OTLP server

1. The load (bench/payloads.py: 20,000 ~4 KB chat spans, 400 runs of 50 calls, gzip protobuf batches of
   512, 4 posting threads; then the "conversations" shape of issue 19: conversations of 300 calls over
   5 traces, an agent span per trace with 60 chat children, OpenInference + GenAI attributes, against
   PostgreSQL + 2 workers) against throwaway ctxview instances: embedded (SQLite, tasks in-process)
   and PostgreSQL + Redis with 1, 2 and 4 Celery worker processes; then embedded and 2 workers again
   over OTLP/gRPC (manage.py serve_otlp_grpc, gzip by gRPC). Timed from the first POST until
   every span is stored, every call normalised (stored and numbered in its run) and every run
   analysed (analysed_seq == call_count); peak RSS of the web (gunicorn) and worker process groups.
   With --phoenix, the same bodies to `phoenix serve` (on PostgreSQL), timed until its GraphQL API counts
   every span; with --endpoint, to any OTLP/HTTP server (acceptance only).
2. The run overview: a 40-call and a 1,000-call run sent through the 2-worker instance, then the run
   page (/runs/<id>/) and the run's calls from the API (/api/v1/runs/<id>/calls, every page).
3. Per-call analysis cost at call 100 and call 2,000 (bench/analysis.py).
4. Stored bytes per call vs raw OTLP bytes for a 200-call run resending its history (bench/storage.py).

The machine is shared: every load row carries the 1-minute load average before and after it. Each row
says where the time went: the share of the cores the web and worker processes kept busy until the load
was done, and how many of the instance's database sessions (per worker) were waiting on a lock or
running a statement, sampled while it drained; and the peak PSS of web and workers together. A second
table gives each row's CPU milliseconds per span by process: web (gunicorn), the gRPC receiver, the
Celery workers, the PostgreSQL backends of its database, their total, and PostgreSQL's shared processes
apart (checkpointer, WAL writer: every database's). `--shapes fresh` (or chats, conversations) runs
only those shapes; `--no-embedded --workers 2 --grpc-workers 2 --conversation-workers 2 --skip
overview,analysis,storage` only the 2-worker PostgreSQL loads.
"""

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import requests
from load import (
    CPU_HEADER,
    CPU_NOTE,
    LOAD_HEADER,
    SHAPES,
    Load,
    LoadResult,
    add_load_arguments,
    build_load,
    cpu_row,
    format_table,
    load_ctxview,
    load_endpoint,
    load_row,
    phoenix_milestones,
    post_all,
    timed_load,
)
from payloads import build_run
from servers import Ctxview, manage, throwaway_phoenix

BENCH = Path(__file__).resolve().parent
# Runs longer than this resend only the last WINDOW messages of their history (an agent trimming it).
FULL_HISTORY_UP_TO = 200
WINDOW = 40


# --- The run overview ----------------------------------------------------------------------------


def _login(instance: Ctxview) -> requests.Session:
    """A browser-like session of a superuser of the instance."""
    env = instance.env | {"DJANGO_SUPERUSER_PASSWORD": "bench-password"}
    manage(env, "createsuperuser", "--noinput", "--username", "bench", "--email", "bench@example.com")
    session = requests.Session()
    session.get(f"{instance.base_url}/login/", timeout=30)
    token = session.cookies.get("csrftoken", "")
    response = session.post(
        f"{instance.base_url}/login/",
        data={"username": "bench", "password": "bench-password", "csrfmiddlewaretoken": token},
        headers={"Referer": f"{instance.base_url}/login/"},
        timeout=30,
    )
    response.raise_for_status()
    return session


class _LoadedOnOpen(HTMLParser):
    """The URLs a page fetches with htmx as soon as it opens (``hx-trigger`` containing ``load``)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        values = dict(attrs)
        triggers = [
            part.strip().split()[0] for part in (values.get("hx-trigger") or "").split(",") if part.strip()
        ]
        if values.get("hx-get") and "load" in triggers:
            self.urls.append(values["hx-get"])


def _get(session: requests.Session, url: str, **kwargs) -> tuple[float, int, int, requests.Response]:
    started = time.perf_counter()
    response = session.get(url, timeout=120, **kwargs)
    size = len(response.content)
    return (time.perf_counter() - started) * 1000, size, response.status_code, response


def _time_page(session: requests.Session, base_url: str, path: str, repeat: int = 5) -> dict:
    """A page and what it loads on open, after one warm-up: median and max of the summed times."""
    totals, parts = [], defaultdict(list)
    size = status = 0
    for attempt in range(repeat + 1):
        took, size, status, response = _get(session, base_url + path)
        parts[path].append(took)
        loaded = _LoadedOnOpen()
        loaded.feed(response.text)
        for url in loaded.urls:
            part_took, part_size, part_status, _ = _get(session, base_url + url)
            took += part_took
            size += part_size
            status = max(status, part_status)
            parts[url].append(part_took)
        if attempt:
            totals.append(took)
    slowest = max(parts, key=lambda url: statistics.median(parts[url]))
    return {
        "median": statistics.median(totals),
        "max": max(totals),
        "bytes": size,
        "status": status,
        "requests": len(parts),
        "slowest": f"{slowest} {statistics.median(parts[slowest]):.0f} ms",
    }


def _time_api(session: requests.Session, url: str, key: str, repeat: int = 5) -> dict:
    """Every page of a paged API answer (``next``), after one warm-up."""
    totals = []
    size = status = pages = 0
    for attempt in range(repeat + 1):
        took = size = pages = 0
        next_url = url
        while next_url:
            part_took, part_size, status, response = _get(
                session, next_url, headers={"Authorization": f"Bearer {key}"}
            )
            took, size, pages = took + part_took, size + part_size, pages + 1
            next_url = response.json().get("next") if status == 200 else None
        if attempt:
            totals.append(took)
    return {"median": statistics.median(totals), "max": max(totals), "bytes": size, "status": status,
            "requests": pages, "slowest": ""}  # fmt: skip


def measure_overview(instance: Ctxview, run_lengths: list[int], clients: int = 1) -> list[tuple[str, ...]]:
    """Send the overview runs one call per request, wait until analysed, time their pages."""
    rows = []
    session = _login(instance)
    for calls in run_lengths:
        window = None if calls <= FULL_HISTORY_UP_TO else WINDOW
        conversation = f"overview-{calls}"
        bodies = build_run(calls, window=window, conversation=conversation)
        started = time.perf_counter()
        posted = post_all(instance.traces_url, instance.key, bodies, [1] * calls, clients, use_gzip=False)
        deadline = time.monotonic() + 600
        query = f"SELECT id, call_count, analysed_seq FROM ingest_run WHERE key = '{conversation}'"
        while True:
            found = instance.execute(query)
            if found and found[0][1] == calls and found[0][2] == calls:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {calls}-call run was not analysed in time: {found}")
            time.sleep(0.2)
        ingest_s = time.perf_counter() - started
        run_id = found[0][0]
        raw = sum(map(len, bodies))
        note = f"ingested and analysed in {ingest_s:.1f} s ({posted.accepted_spans} calls"
        note += f", {raw / calls:,.0f} B/call)"
        measured = [
            (
                "run overview /runs/<id>/ and the panels it loads",
                _time_page(session, instance.base_url, f"/runs/{run_id}/"),
            ),
            (
                "API /api/v1/runs/<id>/calls?limit=500, every page",
                _time_api(session, f"{instance.base_url}/api/v1/runs/{run_id}/calls?limit=500", instance.key),
            ),
        ]
        for label, figures in measured:
            shown = label if figures["status"] == 200 else f"{label} -> HTTP {figures['status']}"
            rows.append(
                (
                    shown,
                    f"{calls}",
                    f"{figures['requests']}",
                    f"{figures['median']:.0f}",
                    f"{figures['max']:.0f}",
                    f"{figures['bytes']:,}",
                    figures["slowest"],
                    note,
                )
            )
    return rows


OVERVIEW_HEADER = ("page", "calls", "requests", "median ms", "max ms", "bytes", "slowest request", "the run")


# --- Analysis cost and storage (their own scripts, in a process of their own) --------------------


def run_json(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--json", *args],
        cwd=BENCH.parent,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode:
        raise RuntimeError(f"{script} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def analysis_rows(result: dict) -> list[tuple[str, ...]]:
    rows = []
    for seq, point in result["points"].items():
        rows.append(
            (
                f"call {seq}",
                f"{point['analysis_ms']:.3f}",
                f"{point['with_state_io_ms']:.3f}",
                f"{point['items']}",
                f"{point['tokens']:,}",
                f"{point['state_bytes'] / 1024:.0f}",
            )
        )
    return rows


ANALYSIS_HEADER = ("analysis", "ms per call", "with state JSON I/O ms", "items", "tokens", "state KiB")


def storage_rows(result: dict) -> list[tuple[str, ...]]:
    calls, raw = result["calls"], result["raw_bytes"]
    rows = [("raw OTLP received", f"{raw:,}", f"{raw // calls:,}", "1.000")]
    for label, size in result["tables"].items():
        rows.append((f"table: {label}", f"{size:,}", f"{size // calls:,}", f"{size / raw:.3f}"))
    stored = result["stored_bytes"]
    rows.append(
        ("stored (without raw batches)", f"{stored:,}", f"{stored // calls:,}", f"{stored / raw:.3f}")
    )
    return rows


STORAGE_HEADER = ("storage (PostgreSQL sizes, indexes and TOAST included)", "bytes", "per call", "/ raw")


# --- Phoenix -------------------------------------------------------------------------------------


def load_phoenix(venv: Path, bodies: list[bytes], spans: list[int], args, shape: str = "") -> LoadResult:
    pg_admin_url = "" if args.phoenix_sqlite else args.pg_admin_url
    with throwaway_phoenix(venv, port=args.phoenix_port, pg_admin_url=pg_admin_url) as phoenix:
        label = f"Arize Phoenix {phoenix.version()} ({phoenix.database})"
        return timed_load(
            f"{shape}: {label}" if shape else label,
            phoenix.traces_url,
            None,
            bodies,
            spans,
            phoenix_milestones(phoenix),
            args.clients,
            not args.no_gzip,
            args.timeout,
            {"web": {phoenix.pgid}},
            poll_interval=1.0,  # each poll is a COUNT over its spans: do not slow it down much
        )


# --- Main ----------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    add_load_arguments(parser)
    parser.add_argument(
        "--workers", default="1,2,4", help="Celery worker counts on PostgreSQL (default 1,2,4)"
    )
    parser.add_argument("--no-embedded", action="store_true", help="skip the embedded (SQLite) instance")
    parser.add_argument(
        "--grpc-workers",
        default="2",
        help="PostgreSQL worker counts loaded over OTLP/gRPC, and embedded unless --no-embedded ('': none)",
    )
    parser.add_argument(
        "--conversation-workers",
        default="2",
        help="PostgreSQL worker counts loaded with the conversations and fresh shapes ('': none)",
    )
    parser.add_argument("--phoenix", type=Path, help="a virtualenv with arize-phoenix: send it the load too")
    parser.add_argument("--phoenix-port", type=int, default=6006)
    parser.add_argument(
        "--phoenix-sqlite", action="store_true", help="Phoenix on SQLite (default: on PostgreSQL, as ctxview)"
    )
    parser.add_argument(
        "--endpoint", help="also send the load to this OTLP/HTTP traces URL (acceptance only)"
    )
    parser.add_argument("--key", help="Bearer key for --endpoint")
    parser.add_argument("--overview-workers", type=int, default=2, help="instance that measures the overview")
    parser.add_argument("--overview-calls", default="40,1000", help="lengths of the overview runs")
    parser.add_argument(
        "--shapes",
        default=",".join(SHAPES),
        help="comma-separated load shapes to run (default: all); one at a time: --shapes fresh",
    )
    parser.add_argument("--skip", default="", help="comma-separated: load, overview, analysis, storage")
    parser.add_argument("--analysis-calls", type=int, default=2000)
    parser.add_argument("--storage-calls", type=int, default=200)
    args = parser.parse_args()
    args.py_spy = Path(args.py_spy) if args.py_spy else None
    args.profile_dir = Path(args.profile_dir) if args.profile_dir else None
    args.overview_calls = [int(calls) for calls in args.overview_calls.split(",") if calls]
    args.skip = {name for name in args.skip.split(",") if name}
    args.shapes = [shape for shape in args.shapes.split(",") if shape]
    unknown = set(args.shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {', '.join(sorted(unknown))}: choose from {', '.join(SHAPES)}")
    return args


def _load_row(load: Load, mode: str, workers: int, protocol: str, args, after=None) -> LoadResult:
    """One load against a throwaway ctxview, with a heartbeat; prints its row as soon as it is done."""
    stop = threading.Event()
    threading.Thread(target=heartbeat, args=(stop,), daemon=True).start()
    try:
        result = load_ctxview(
            mode,
            workers,
            load.bodies,
            load.spans,
            args,
            after=after,
            protocol=protocol,
            calls_per_span=load.calls_per_span,
            shape=load.shape,
        )
    finally:
        stop.set()
    print(format_table(LOAD_HEADER, [load_row(result)]).splitlines()[-1], flush=True)
    print("  CPU ms/span: " + format_table(CPU_HEADER, [cpu_row(result)]).splitlines()[-1], flush=True)
    return result


def heartbeat(stop: threading.Event) -> None:
    """A line a minute, so a long load does not look hung."""
    started = time.monotonic()
    while not stop.wait(60):
        print(f"  ... {time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    args = parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the children
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=BENCH, capture_output=True, text=True
    )
    print(
        f"ctxview benchmark suite: {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, commit {commit.stdout.strip() or '?'}, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    sections = []
    results: list[LoadResult] = []
    overview: list[tuple[str, ...]] = []
    try:
        if "load" not in args.skip and "chats" in args.shapes:
            load = build_load(args.spans, not args.no_gzip, "chats")
            targets = [] if args.no_embedded else [("embedded", 1, "http")]
            targets += [("postgres", int(count), "http") for count in args.workers.split(",") if count]
            # The same load over OTLP/gRPC, beside its HTTP row.
            targets += [] if args.no_embedded or not args.grpc_workers else [("embedded", 1, "grpc")]
            targets += [("postgres", int(count), "grpc") for count in args.grpc_workers.split(",") if count]
            for mode, workers, protocol in targets:
                measure = None
                measures = protocol == "http" and "overview" not in args.skip
                if mode == "postgres" and workers == args.overview_workers and measures:

                    def measure(instance, _result):
                        overview.extend(measure_overview(instance, args.overview_calls))

                results.append(_load_row(load, mode, workers, protocol, args, after=measure))
            if args.phoenix:
                results.append(load_phoenix(args.phoenix, load.bodies, load.spans, args, load.shape))
                print(format_table(LOAD_HEADER, [load_row(results[-1])]).splitlines()[-1], flush=True)
            if args.endpoint:
                results.append(load_endpoint(args.endpoint, args.key, load.bodies, load.spans, args))
        if "load" not in args.skip:
            conversation_workers = [int(count) for count in args.conversation_workers.split(",") if count]
            # The conversations shape, then the same with every call's text new (issue 37).
            shapes = [shape for shape in ("conversations", "fresh") if shape in args.shapes]
            for shape in shapes if conversation_workers else ():
                load = build_load(args.spans, not args.no_gzip, shape)
                for workers in conversation_workers:
                    results.append(_load_row(load, "postgres", workers, "http", args))
                if args.phoenix:
                    results.append(load_phoenix(args.phoenix, load.bodies, load.spans, args, load.shape))
                    print(format_table(LOAD_HEADER, [load_row(results[-1])]).splitlines()[-1], flush=True)
            sections.append(format_table(LOAD_HEADER, [load_row(result) for result in results]))
            sections.append(
                format_table(CPU_HEADER, [cpu_row(result) for result in results]) + "\n" + CPU_NOTE
            )
            notes = [f"- {result.label}: {note}" for result in results for note in result.notes]
            if notes:
                sections.append("\n".join(notes))
        if overview:
            sections.append(format_table(OVERVIEW_HEADER, overview))
        if "analysis" not in args.skip:
            analysis = run_json("analysis.py", "--calls", str(args.analysis_calls))
            first, last = analysis["points"]["100"], analysis["points"][str(args.analysis_calls)]
            table = format_table(ANALYSIS_HEADER, analysis_rows(analysis))
            ratio = last["analysis_ms"] / first["analysis_ms"]
            sections.append(f"{table}\nratio call {args.analysis_calls} / call 100: {ratio:.2f}")
        if "storage" not in args.skip:
            storage = run_json(
                "storage.py", "--calls", str(args.storage_calls), "--database-url", args.pg_admin_url
            )
            sections.append(format_table(STORAGE_HEADER, storage_rows(storage)))
    except KeyboardInterrupt:
        sys.exit("interrupted; everything started was stopped")
    print()
    print("\n\n".join(sections))
    print(f"\nload average at the end: {' '.join(f'{value:.1f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
