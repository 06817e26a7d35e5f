"""Monitor evaluation cost against the number of stored calls (issue 34: flat from 10k to 1M calls).

    .venv/bin/python bench/monitors.py                         # 10,000 and 1,000,000 calls
    .venv/bin/python bench/monitors.py --calls 10000,100000 --ticks 5

For each size, a process of its own and a throwaway PostgreSQL database (dropped at the end):

- the history: runs of 20-180 calls (a call every 3-15 s, growing context, ~4% cache breaks with their
  cause, ~3% findings) started at random over the last ``--days`` days across ``--projects`` projects,
  three services, three models, a sub-agent on some calls; runs started lately are still going. The calls
  go in by COPY (``ingest.bulk``), with the columns the ORM reads; the roll-up rows are what the analysis
  would have written for them: each call's ``ingest.rollups.contribution`` merged per run, segment,
  minute and scope, and its first sightings through ``RollupWrites``;
- one monitor per starting point of the monitors page (``ctxview.monitors.writes.TEMPLATES``: every kind,
  and a cause of cache breaks both as "first seen" and as a cost) on the first project, made through
  ``create_monitor``; then ``VACUUM ANALYZE``, as autovacuum would have done, and a checkpoint.

Once every size is filled: the tick ``manage.py monitors evaluate`` runs (``engine.evaluate``, at the
history's last moment), after a warm-up, ``--ticks`` times per size, the sizes in turns (the machine's
drift hits all alike): median and best; after each, the first tick of an hour (every monitor's kept
baseline dropped, so its days of roll-ups are summed again); then each monitor ticked alone the same
way; then one tick per size under ``CaptureQueriesContext``, every SELECT of it explained (ANALYZE,
BUFFERS): rows its scans read (kept and filtered out), buffers, and whether any reads the calls table.
The plan of the heaviest statement of the largest history is printed.

On a busy machine every time stretches; rows read and buffers do not.
"""

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from load import format_table
from servers import postgres_database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SECOND = 1_000_000_000
CHUNK = 20_000  # calls per COPY
SERVICES = ("support-bot", "coder", "research")
AGENTS = {"support-bot": "triage", "coder": "planner", "research": "researcher"}
SUB_AGENT = "summariser"
# USD per million tokens: input, cache write, cache read, output (the bench's own; any figures will do).
MODELS = {
    "claude-sonnet-4-5": (3.0, 3.75, 0.30, 15.0),
    "gpt-4.1": (2.0, 2.0, 0.50, 8.0),
    "gemini-2.5-pro": (1.25, 1.25, 0.31, 10.0),
}
SUB_MODEL = "claude-haiku-4-5"
PRICES = MODELS | {SUB_MODEL: (1.0, 1.25, 0.10, 5.0)}
# Causes and findings in rough proportion to how often they turn up.
CAUSES = (
    ("tools_changed",) * 3 + ("volatile_system_prompt",) * 2 + ("key_order", "ttl_expired", "model_changed")
)
FINDINGS = ("tool_results_dominant",) * 3 + ("duplicate_content", "lost_in_middle", "stale_version")
BREAK_RATE = 0.04
FINDING_RATE = 0.03


# --- The history --------------------------------------------------------------------------------------


class _Call:
    """What ``rollups.contribution`` reads of a stored call."""

    __slots__ = ("seq", "start_ns", "usage")

    def __init__(self, seq: int, start_ns: int, usage: dict) -> None:
        self.seq, self.start_ns, self.usage = seq, start_ns, usage

    def usage_dict(self) -> dict:
        return self.usage


def fill(calls: int, days: float, project_count: int, now: datetime, seed: int) -> dict:
    """Projects, runs, calls, roll-ups and first sightings: ``calls`` calls in the ``days`` before ``now``
    (the roll-ups and sightings as the analysis of those calls would have written them)."""
    from django.db import connection

    from ingest.bulk import insert_rows
    from ingest.models import Call, Project, Run
    from ingest.rollups import SEGMENT, FirstSeen, Rollup, RollupWrites, contribution, empty, merge, minute_of

    rng = random.Random(seed)
    projects = [Project.objects.create(slug=f"bench-{n}", name=f"bench {n}") for n in range(project_count)]
    now_ns = int(now.timestamp() * SECOND)
    span_ns = int(days * 86400 * SECOND)
    rollups: dict[tuple, dict] = {}
    first = RollupWrites()  # only its first sightings: written as ingest writes them
    runs, rows = [], []
    made = run_id = 0

    def flush() -> None:
        insert_rows(Run, runs, on_conflict="fail", with_ids=True)
        insert_rows(Call, rows, on_conflict="fail")
        runs.clear()
        rows.clear()

    while made < calls:
        run_id += 1
        project = projects[run_id % project_count]
        service = SERVICES[rng.randrange(len(SERVICES))]
        model = rng.choice(list(MODELS))
        length = rng.randint(20, 180)
        at = now_ns - rng.randrange(span_ns)
        trace = f"{rng.getrandbits(128):032x}"
        totals = dict.fromkeys(("uncached", "cache_write", "cache_read", "output", "prompt_total"), 0)
        models_used = [model]
        previous = 0  # the previous call's prompt: what the cache holds
        seq = 0
        started = at
        while seq < length and at <= now_ns and made < calls:
            seq += 1
            made += 1
            sub = seq % 7 == 0  # a sub-agent's call, on a smaller model
            call_model, agent = (SUB_MODEL, SUB_AGENT) if sub else (model, AGENTS[service])
            if sub and SUB_MODEL not in models_used:
                models_used.append(SUB_MODEL)
            prompt = min(3_000 + seq * 900 + rng.randrange(400), 120_000)
            broke = seq > 1 and rng.random() < BREAK_RATE
            read = 0 if seq == 1 else (1_800 if broke else min(previous, prompt))
            write = prompt - read
            output = rng.randint(150, 1_200)
            usage = {"uncached": 0, "cache_write": write, "cache_read": read, "output": output,
                     "reasoning": None, "prompt_total": prompt}  # fmt: skip
            price = PRICES[call_model]
            cost = (write * price[1] + read * price[2] + output * price[3]) / 1e6
            item = f"tool:tool_{rng.randrange(12)}"
            cache = {"broke": broke, "expected_read": min(previous, prompt), "reported_read": read}
            if broke:
                cache |= {
                    "cause": rng.choice(CAUSES),
                    "invalidator_item_id": item,
                    "tokens_rewritten": prompt - read,
                    "cost_usd": (prompt - read) * (price[1] - price[2]) / 1e6,
                    "detail": {"bytes": {"offset": rng.randrange(4_000), "before": "a", "after": "b"}},
                }
            findings = []
            if broke:
                findings.append({"type": "cache_invalidated", "item_id": item})
            if rng.random() < FINDING_RATE:
                findings.append({"type": rng.choice(FINDINGS), "item_id": f"result-{seq - 1}"})
            end = at + rng.randint(1, 8) * SECOND
            rows.append(
                {
                    "project_id": project.id,
                    "run_id": run_id,
                    "trace_id": trace,
                    "span_id": f"{run_id:08x}{seq:08x}",
                    "seq": seq,
                    "turn": (seq - 1) // 5 + 1,
                    "name": f"chat {call_model}",
                    "start_ns": at,
                    "end_ns": end,
                    "started_at": datetime.fromtimestamp(at / SECOND, tz=UTC),
                    "provider": "anthropic" if call_model.startswith("claude") else "other",
                    "operation": "chat",
                    "request_model": call_model,
                    "response_model": call_model,
                    "agent_name": agent,
                    **{name: value for name, value in usage.items() if name != "reasoning"},
                    "usage_raw": {
                        "gen_ai.usage.input_tokens": prompt - read,
                        "gen_ai.usage.output_tokens": output,
                    },
                    "finish_reasons": ["tool_use"],
                    "analysis": {"cache": cache, "buckets": {"total": prompt}, "conflicts": []},
                    "window_total": prompt,
                }
            )
            for name in totals:
                totals[name] += usage[name]
            value = contribution(_Call(seq, at, usage), cache, prompt, findings, (cost,), {item: "tool"})
            scope = (service, call_model, agent)
            key = (project.id, run_id, (seq - 1) // SEGMENT, minute_of(at), *scope)
            merge(rollups.setdefault(key, empty()), value)
            sighting = {"run": run_id, "seq": seq, "at": at}
            if broke:
                found = value["breaks"][cache["cause"]]["first"]
                first.see(project.id, FirstSeen.Kind.CAUSE, cache["cause"], scope, {**sighting, **found})
            for finding in findings:
                first.see(project.id, FirstSeen.Kind.FINDING, finding["type"], scope,
                          {**sighting, "item": finding["item_id"]})  # fmt: skip
            previous = prompt
            last = at
            at = end + rng.randint(2, 7) * SECOND
        runs.append(
            {
                "id": run_id,
                "project_id": project.id,
                "key": f"session-{run_id}",
                "key_source": "session.id",
                "service_name": service,
                "agent_name": AGENTS[service],
                "started_at": datetime.fromtimestamp(started / SECOND, tz=UTC),
                "last_call_at": datetime.fromtimestamp(last / SECOND, tz=UTC),
                "model_names": models_used,
                "call_count": seq,
                "turn_count": (seq - 1) // 5 + 1,
                **totals,
                "analysed_seq": seq,
                "last_start_ns": last,
                "updated_at": now,
            }
        )
        if len(rows) >= CHUNK:
            flush()
            if made % 200_000 < CHUNK:
                print(f"  {made:,} calls stored", file=sys.stderr, flush=True)
    flush()
    first.flush()
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('ingest_run', 'id'), %s)", [run_id])
    keys = sorted(rollups)
    for start in range(0, len(keys), CHUNK):
        insert_rows(
            Rollup,
            [
                {
                    "project_id": key[0],
                    "run_id": key[1],
                    "segment": key[2],
                    "minute": key[3],
                    "service": key[4],
                    "model": key[5],
                    "agent": key[6],
                    **rollups[key],
                }
                for key in keys[start : start + CHUNK]
            ],
            on_conflict="fail",
        )
    return {"runs": run_id, "rollups": len(keys), "project_id": projects[0].id}


def add_monitors(project_id: int) -> dict[int, str]:
    """One monitor per starting point of the monitors page; id -> what it is."""
    from ctxview.monitors.writes import TEMPLATES, create_monitor
    from ingest.models import Project

    project = Project.objects.get(id=project_id)
    made = {}
    for slug, (name, kind, params) in TEMPLATES.items():
        monitor, _ = create_monitor(project, None, {"name": name, "kind": kind, "params": params})
        made[monitor.id] = f"{kind} ({slug})"
    return made


# --- The tick -----------------------------------------------------------------------------------------


def timed_tick(now: datetime, ids: list[int] | None = None) -> float:
    from ctxview.monitors import engine

    started = time.perf_counter()
    engine.evaluate(now=now, ids=ids)
    return (time.perf_counter() - started) * 1000


def old_sighting(project_id: int, monitors: dict[int, str], now: datetime) -> list[float]:
    """A cause first seen in a call of 6 days ago (an imported run, say): the "first seen" monitor's
    tick that opens its episode (reading the scope's figures since that call), and the next one."""
    from ingest.rollups import FirstSeen

    [monitor_id] = [key for key, label in monitors.items() if label.endswith("(new-cause)")]
    from ctxview.models import Monitor

    Monitor.objects.filter(id=monitor_id).update(cooldown_minutes=0)  # else the next one waits 10 minutes
    name = f"old_{int(time.time() * 1000) % 10**9}"  # a new name each time: a new sighting
    FirstSeen.objects.create(project_id=project_id, kind="cause", name=name, call_at=now - timedelta(days=6))
    return [timed_tick(now, [monitor_id]), timed_tick(now, [monitor_id])]


def _scans(node: dict, found: list[dict]) -> None:
    if "Relation Name" in node:
        loops = node.get("Actual Loops", 1)
        read = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        read += node.get("Rows Removed by Index Recheck", 0)
        found.append({"table": node["Relation Name"], "node": node["Node Type"], "rows": read * loops})
    for child in node.get("Plans", []):
        _scans(child, found)


def short(sql: str) -> str:
    """The statement without its column list: what it reads and how it filters."""
    sql = re.sub(r'"ingest_|"ctxview_', '"', sql)
    sql = re.sub(r"^SELECT .*? FROM ", "SELECT … FROM ", sql, flags=re.S)
    sql = re.sub(r"'(\d{4}-\d\d-\d\d)T?\s?(\d\d:\d\d):\d\d(\.\d+)?\+00:00'::timestamptz", r"'\1 \2'", sql)
    return sql.replace('"', "")


def explained_tick(now: datetime) -> dict:
    """One tick's statements, every SELECT explained: rows read, buffers, tables, the heaviest's plan;
    each statement with the monitor it was for (the one whose row the tick locked last)."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from ctxview.monitors import engine

    with CaptureQueriesContext(connection) as captured:
        engine.evaluate(now=now)
    explained = []
    monitor = None
    with transaction.atomic(), connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            locked = re.search(r'WHERE "ctxview_monitor"."id" = (\d+) .*FOR UPDATE', sql)
            monitor = int(locked.group(1)) if locked else monitor
            entry = {"sql": short(sql), "monitor": monitor, "select": False, "rows": 0, "buffers": 0,
                     "ms": 0.0, "tables": {}}  # fmt: skip
            if "ctxview_delivery" in sql or not locked and monitor is None:
                entry["monitor"] = None  # the tick's own: the monitors to look at, the deliveries due
            explained.append(entry)
            if not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}")
            plan = cursor.fetchone()[0]
            plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]
            scans: list[dict] = []
            _scans(plan["Plan"], scans)
            for scan in scans:
                entry["tables"][scan["table"]] = entry["tables"].get(scan["table"], 0) + scan["rows"]
            top = plan["Plan"]
            entry.update(
                select=True,
                full=sql,
                rows=sum(entry["tables"].values()),
                buffers=top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
                ms=plan["Execution Time"],
            )
        heaviest = max(explained, key=lambda entry: entry["ms"])
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {heaviest['full']}")
        heaviest_plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)  # EXPLAIN ANALYZE ran the SELECT … FOR UPDATE too: nothing kept
    for entry in explained:
        entry.pop("full", None)
    return {"statements": explained, "heaviest_sql": heaviest["sql"], "heaviest_plan": heaviest_plan}


def serve_one(args: argparse.Namespace) -> None:
    """One size, in this process: fill a throwaway database, say so, then answer the parent's commands
    (one per line on stdin, each answered by a JSON line): ``tick`` (one tick, timed), ``alone`` (each
    monitor ticked alone, timed), ``finish`` (the explained tick and the figures; the database goes)."""
    with postgres_database(args.database_url, prefix="ctxview_bench_monitors") as url:
        os.environ["DATABASE_URL"] = url
        os.environ.pop("CELERY_BROKER_URL", None)
        os.environ["DJANGO_SETTINGS_MODULE"] = "ctxview.settings"
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection, connections

        from ctxview.models import Monitor

        try:
            call_command("migrate", verbosity=0)
            now = datetime.now(UTC)
            started = time.perf_counter()
            history = fill(args.size, args.days, args.projects, now, args.seed)
            with connection.cursor() as cursor:
                cursor.execute("VACUUM ANALYZE")
                # The fill's dirty pages written now, not by a checkpoint that slows the ticks' commits.
                cursor.execute("CHECKPOINT")
            fill_s = time.perf_counter() - started
            monitors = add_monitors(history["project_id"])
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*), pg_total_relation_size('ingest_call') FROM ingest_call")
                calls, calls_bytes = cursor.fetchone()
                cursor.execute(
                    "SELECT count(*), count(*) FILTER (WHERE project_id = %s AND minute > %s)"
                    " FROM ingest_rollup",
                    [history["project_id"], now - timedelta(days=7, minutes=60)],
                )
                rollups, project_week = cursor.fetchone()
            print(f"  {calls:,} calls, {rollups:,} roll-up rows: ready", file=sys.stderr, flush=True)
            timed_tick(now)  # warm: the first tick also writes what a firing monitor opens
            for monitor_id in monitors:
                timed_tick(now, [monitor_id])
            print(json.dumps({"ready": calls}), flush=True)
            for command in sys.stdin:
                if command.strip() == "tick":
                    print(json.dumps(timed_tick(now)), flush=True)
                elif command.strip() == "hourly":
                    # The first tick of an hour: the baselines' whole hours are summed again.
                    Monitor.objects.update(baseline={})
                    print(json.dumps(timed_tick(now)), flush=True)
                elif command.strip() == "old-sighting":
                    print(json.dumps(old_sighting(history["project_id"], monitors, now)), flush=True)
                elif command.strip() == "alone":
                    print(json.dumps({monitor_id: timed_tick(now, [monitor_id]) for monitor_id in monitors}),
                          flush=True)  # fmt: skip
                else:
                    break
            tick = explained_tick(now)
            states = dict(Monitor.objects.values_list("name", "state"))
        finally:
            connections.close_all()  # else the database cannot be dropped
    figures = {
        "calls": calls,
        "calls_bytes": calls_bytes,
        "runs": history["runs"],
        "rollups": rollups,
        "rollups_project_week": project_week,
        "fill_s": fill_s,
        "monitors": [{"id": monitor_id, "label": label} for monitor_id, label in monitors.items()],
        "firing": sorted(name for name, state in states.items() if state == "firing"),
        **tick,
    }
    print(json.dumps(figures), flush=True)


class Size:
    """A child process holding one size's database, ticking on command."""

    def __init__(self, size: int, args: argparse.Namespace) -> None:
        command = [sys.executable, __file__, "--size", str(size), "--days", str(args.days)]
        command += ["--projects", str(args.projects), "--seed", str(args.seed)]
        command += ["--database-url", args.database_url]
        # stderr: its progress, straight to ours
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.size = size
        self.ticks: list[float] = []
        self.hourly: list[float] = []
        self.old_sighting: list[list[float]] = []
        self.alone: dict[str, list[float]] = {}
        self.load: list[float] = []

    def ask(self, command: str):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.answer()

    def answer(self):
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.size:,}-call process ended (exit {self.process.wait()})")
        return json.loads(line)

    def finish(self) -> dict:
        figures = self.ask("finish")
        self.process.wait()
        for monitor in figures["monitors"]:
            monitor["alone_ms"] = statistics.median(self.alone[str(monitor["id"])])
        return figures | {
            "ticks_ms": self.ticks,
            "hourly_ms": self.hourly,
            "old_sighting_ms": self.old_sighting,
            "load": self.load,
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()  # it finishes what it does and drops its database
            self.process.wait()


def measure(args: argparse.Namespace) -> list[dict]:
    """Every size filled (one after the other), then ticked in turns, so that the machine's drift hits
    all alike; then each tick explained."""
    sizes: list[Size] = []
    try:
        for size in args.calls:
            sizes.append(Size(size, args))
            sizes[-1].answer()  # filled
        for _ in range(args.ticks):
            for size in sizes:
                size.load.append(os.getloadavg()[0])
                size.ticks.append(size.ask("tick"))
                size.hourly.append(size.ask("hourly"))
        for _ in range(3):
            for size in sizes:
                size.old_sighting.append(size.ask("old-sighting"))
        for _ in range(args.ticks):
            for size in sizes:
                for monitor_id, took in size.ask("alone").items():
                    size.alone.setdefault(monitor_id, []).append(took)
        return [size.finish() for size in sizes]
    finally:
        for size in sizes:
            size.stop()


# --- Report -------------------------------------------------------------------------------------------


HEADER = ("calls stored", "runs", "rollup rows (monitored project, 7 days)", "tick ms median / best",
          "hourly tick ms median (baselines summed again)",
          "statements per tick", "SQL ms per tick", "rows read per tick", "buffers per tick",
          "calls table read")  # fmt: skip


def row(result: dict) -> tuple[str, ...]:
    statements = result["statements"]
    calls_read = sum(entry["tables"].get("ingest_call", 0) for entry in statements)
    verbs = [entry["sql"].split()[0] for entry in statements]
    return (
        f"{result['calls']:,}",
        f"{result['runs']:,}",
        f"{result['rollups']:,} ({result['rollups_project_week']:,})",
        f"{statistics.median(result['ticks_ms']):.1f} / {min(result['ticks_ms']):.1f}",
        f"{statistics.median(result['hourly_ms']):.1f}",
        f"{len(statements)}: " + ", ".join(f"{n} {verb}" for verb, n in Counter(verbs).most_common()),
        f"{sum(entry['ms'] for entry in statements):.1f}",
        f"{sum(entry['rows'] for entry in statements):,}",
        f"{sum(entry['buffers'] for entry in statements):,}",
        "no" if not calls_read else f"YES, {calls_read:,} rows",
    )


def placed(result: dict) -> dict[tuple, dict]:
    """The tick's statements by (the monitor's place in the tick, the statement's place in its monitor's),
    the same statements in another history as long as each monitor took the same path."""
    places = {entry["id"]: place for place, entry in enumerate(result["monitors"])}
    found, counts = {}, Counter()
    for entry in result["statements"]:
        monitor = places.get(entry["monitor"], -1)
        found[(monitor, counts[monitor])] = entry
        counts[monitor] += 1
    return found


def report(results: list[dict]) -> str:
    sections = [format_table(HEADER, [row(result) for result in results])]
    # Each monitor: alone (median ms of ticks of it alone); in the explained tick, its statements' SQL
    # time and the rows they read.
    header = ("monitor", *(f"{result['calls']:,} calls: alone ms / SQL ms / rows read" for result in results))
    lines = []
    for number, monitor in enumerate(results[0]["monitors"]):
        cells = []
        for result in results:
            mine = result["monitors"][number]
            statements = [entry for entry in result["statements"] if entry["monitor"] == mine["id"]]
            sql_ms = sum(entry["ms"] for entry in statements)
            rows = sum(entry["rows"] for entry in statements)
            cells.append(f"{mine['alone_ms']:.1f} / {sql_ms:.2f} / {rows:,}")
        lines.append((monitor["label"], *cells))
    sections.append(format_table(header, lines))
    # The statements that read most rows in the largest history, and the same statements in the others.
    labels = {place: entry["label"] for place, entry in enumerate(results[-1]["monitors"])}
    tables = [placed(result) for result in results]
    heaviest = sorted(tables[-1], key=lambda place: -tables[-1][place]["rows"])[:6]
    header = ("monitor: statement (the 6 reading most rows in the largest history)",
              *(f"{result['calls']:,} calls: rows / ms" for result in results))  # fmt: skip
    lines = []
    for place in sorted(heaviest):
        cells = [f"{t[place]['rows']:,} / {t[place]['ms']:.2f}" if place in t else "-" for t in tables]
        lines.append((f"{labels.get(place[0], 'tick')}: {tables[-1][place]['sql'][:150]}", *cells))
    sections.append(format_table(header, lines))
    last = results[-1]
    sections.append(
        f"Heaviest statement at {last['calls']:,} calls:\n{last['heaviest_sql']}\n\n{last['heaviest_plan']}"
    )
    notes = [
        f"- {result['calls']:,} calls: filled in {result['fill_s']:.0f} s; calls table "
        f"{result['calls_bytes'] / 2**20:,.0f} MiB; firing: {', '.join(result['firing']) or 'none'}; "
        f"load average {min(result['load']):.1f}-{max(result['load']):.1f} while ticking; a cause first "
        f"seen 6 days back, its monitor's tick that opens the episode / the next: "
        + ", ".join(f"{opened:.1f} / {after:.1f} ms" for opened, after in result["old_sighting_ms"])
        for result in results
    ]
    sections.append("\n".join(notes))
    return "\n\n".join(sections)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="10000,1000000", help="sizes, comma-separated")
    parser.add_argument("--days", type=float, default=7.0, help="the history's span before now")
    parser.add_argument("--projects", type=int, default=4, help="projects sharing the calls")
    parser.add_argument("--ticks", type=int, default=9, help="timed ticks per size, after a warm-up")
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)  # one size, in this process
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` drops the database
    if args.size:
        serve_one(args)
        return
    args.calls = [int(size) for size in args.calls.split(",") if size]
    try:
        results = measure(args)
    except KeyboardInterrupt:
        sys.exit("interrupted; the databases were dropped")
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"monitors: one evaluation tick against stored calls ({args.days:g} days of history, "
        f"{args.projects} projects; {args.ticks} ticks per size after a warm-up, the sizes in turns)\n"
    )
    print(report(results))


if __name__ == "__main__":
    main()
