"""The run overview's cost on a short and a long run: server time and bytes per request, and in a browser.

Starts a throwaway ctxview (gunicorn, one worker, DEBUG off) on an empty embedded database (or on a
fresh PostgreSQL database with --postgres), sends generated runs of 40 and 1,000 calls through the SDK
and the real OTLP path (``manage.py longrun``), then measures the overview page and each of its panels:
the first request (cold: the presence map's index is built) and the median of warm ones, raw bytes and
gzip bytes (what a compressing proxy sends). With chromium present it also loads the page in a browser
and reports the time until every chart is drawn and the bytes transferred (first visit, and a revisit
with the browser's cache).

    .venv/bin/python bench/ui.py [--calls 40 1000] [--postgres postgres://postgres@127.0.0.1:5432/postgres]
"""

import argparse
import gzip
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
PANELS = ("composition", "cache", "findings", "presence", "calls")
CHROMIUM = os.environ.get("CTXVIEW_CHROMIUM", "/usr/bin/chromium")
SETUP = """
from django.contrib.auth import get_user_model
from ingest.keys import create_key
from ingest.models import Membership, Project
user = get_user_model().objects.create_user("bench", password="bench-pass")
project = Project.objects.create(slug="bench", name="Bench")
Membership.objects.create(project=project, user=user, role="admin")
print(create_key(project, name="bench"))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def manage(env: dict, *args: str, capture: bool = False) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return result.stdout if capture else ""


def fresh_postgres(url: str) -> tuple[str, str]:
    import psycopg

    name = f"ctxui_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}", name


def drop_postgres(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(session: requests.Session, url: str, warm: int) -> dict:
    start = time.perf_counter()
    response = session.get(url)
    cold = time.perf_counter() - start
    response.raise_for_status()
    times = []
    for _ in range(warm):
        start = time.perf_counter()
        session.get(url).raise_for_status()
        times.append(time.perf_counter() - start)
    return {
        "cold_ms": cold * 1000,
        "warm_ms": statistics.median(times) * 1000,
        "bytes": len(response.content),
        "gzip": len(gzip.compress(response.content)),
    }


def in_browser(base: str, run_id: int) -> dict | None:
    if not Path(CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    args = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
    out = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{base}/login/")
        page.fill("input[name=username]", "bench")
        page.fill("input[name=password]", "bench-pass")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        for visit in ("first", "again"):
            start = time.perf_counter()
            page.goto(f"{base}/runs/{run_id}/")
            page.wait_for_function(
                "() => document.querySelectorAll('[data-figure]').length === 4 && [...document"
                ".querySelectorAll('[data-figure]')].every(el => el.dataset.drawn === 'ready')",
                timeout=120_000,
            )
            elapsed = time.perf_counter() - start
            entries = page.evaluate(
                "() => [...performance.getEntriesByType('navigation'), ...performance.getEntriesByType"
                "('resource')].map(e => [e.name, e.transferSize, e.decodedBodySize])"
            )
            static = sum(size for name, size, _ in entries if "/static/" in name)
            dynamic = sum(size for name, size, _ in entries if "/static/" not in name)
            out[visit] = {"ms": elapsed * 1000, "static_bytes": static, "page_bytes": dynamic}
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[40, 1000])
    parser.add_argument("--postgres", help="a PostgreSQL server URL; a fresh database is made and dropped")
    parser.add_argument("--warm", type=int, default=5, help="warm requests per URL (median reported)")
    parser.add_argument("--json", help="also write the figures to this file")
    options = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="ctxview-bench-ui-"))
    env = os.environ | {
        "CTXVIEW_DATA_DIR": str(data_dir),
        "CTXVIEW_SECRET_KEY": "bench-ui",
        "CTXVIEW_DEBUG": "false",
        "CTXVIEW_INGEST_RATE_LIMIT": "0",
    }
    env.pop("CELERY_BROKER_URL", None)  # embedded: tasks run in the web process
    database = None
    if options.postgres:
        env["DATABASE_URL"], database = fresh_postgres(options.postgres)
    else:
        env.pop("DATABASE_URL", None)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = None
    try:
        manage(env, "migrate", "--noinput", "-v0")
        key = manage(env, "shell", "-c", SETUP, capture=True).strip().splitlines()[-1]
        log = (data_dir / "server.log").open("wb")
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "ctxview.wsgi:application",
                "-b",
                f"127.0.0.1:{port}",
                "-w",
                "1",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(100):
            try:
                requests.get(f"{base}/login/", timeout=10)
                break
            except requests.RequestException:
                time.sleep(0.2)
        figures = {}
        for calls in options.calls:
            start = time.perf_counter()
            manage(
                env,
                "longrun",
                "--url",
                base,
                "--key",
                key,
                "--calls",
                str(calls),
                "--run-id",
                f"bench-{calls}",
            )
            ingest_s = time.perf_counter() - start
            runs = requests.get(f"{base}/api/v1/runs", headers={"Authorization": f"Bearer {key}"}).json()[
                "runs"
            ]
            run_id = next(run["id"] for run in runs if run["key"] == f"bench-{calls}")
            session = requests.Session()
            session.get(f"{base}/login/")
            session.post(
                f"{base}/login/",
                data={
                    "username": "bench",
                    "password": "bench-pass",
                    "csrfmiddlewaretoken": session.cookies["csrftoken"],
                },
                headers={"Referer": f"{base}/login/"},
            ).raise_for_status()
            rows = {"page": measure(session, f"{base}/runs/{run_id}/", options.warm)}
            for panel in PANELS:
                rows[panel] = measure(session, f"{base}/runs/{run_id}/panels/{panel}", options.warm)
            figures[calls] = {"ingest_s": ingest_s, "requests": rows, "browser": in_browser(base, run_id)}
        report(figures, "PostgreSQL" if options.postgres else "SQLite (embedded)")
        if options.json:
            Path(options.json).write_text(json.dumps(figures, indent=2))
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if database:
            drop_postgres(options.postgres, database)
        shutil.rmtree(data_dir, ignore_errors=True)


def report(figures: dict, database: str) -> None:
    print(f"\nRun overview, {database}, gunicorn 1 worker, DEBUG off\n")
    print("| run | request | cold ms | warm ms | bytes (uncompressed) | gzip bytes |")
    print("|---|---|---:|---:|---:|---:|")
    for calls, result in figures.items():
        total = {"cold_ms": 0.0, "warm_ms": 0.0, "bytes": 0, "gzip": 0}
        for name, row in result["requests"].items():
            for field in total:
                total[field] += row[field]
            print(
                f"| {calls} calls | {name} | {row['cold_ms']:.0f} | {row['warm_ms']:.0f} | "
                f"{row['bytes']:,} | {row['gzip']:,} |"
            )
        print(
            f"| **{calls} calls** | **all (page + 5 panels)** | **{total['cold_ms']:.0f}** | "
            f"**{total['warm_ms']:.0f}** | **{total['bytes']:,}** | **{total['gzip']:,}** |"
        )
    print()
    for calls, result in figures.items():
        print(f"{calls} calls: ingested through OTLP in {result['ingest_s']:.1f} s")
        browser = result["browser"]
        if browser:
            for visit, row in browser.items():
                print(
                    f"  browser, {visit} visit: all charts drawn in {row['ms']:.0f} ms; transferred "
                    f"{row['page_bytes']:,} B of page and panels, {row['static_bytes']:,} B of static files"
                )


if __name__ == "__main__":
    main()
