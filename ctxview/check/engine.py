"""The check's engine: the server's own ingest pipeline, run in this process over a private SQLite
database in memory, so ``ctxview check`` gives the runs, turns, agents, analyses and findings the server
gives for the same spans, with no server and nothing to set up.

Each export goes through ``ingest.accept.accept`` (validation, masking, the raw batch) and then the
Celery tasks, eager as in the embedded server (``process_batch_task``: the pipeline's steps, numbering,
agents, the inline analysis; ``analyse_run_task`` when a run needs more). The runs are then read back as
the read API serialises them (``Run.to_dict``, ``Call.to_dict``, ``Finding.to_dict``), so the rules in
``ctxview.check.rules`` read the same shape from this engine as from a server.

Django is configured here, in code, for this process alone (no settings module, no environment); the
tables are made from the models with the schema editor (15 ms; no migrations to run).
A process whose Django is someone else's (the tests of a Django project, this repository's suite) must
not be configured again, and its database must not be touched: there the engine runs in a child process
(``python -m ctxview.check.engine``), the exports sent on its stdin and the runs read from its stdout.
"""

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator

from google.protobuf.message import Message

from ctxview.check.inputs import Export, Unusable

# Marks a process whose Django this module configured (and may use again).
MARK = "CTXVIEW_CHECK_ENGINE"
SETTINGS = {
    MARK: True,
    "INSTALLED_APPS": ["django.contrib.contenttypes", "django.contrib.auth", "ingest"],
    # The process's own database, in memory: the engine uses one connection, in one thread.
    "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    "DEFAULT_AUTO_FIELD": "django.db.models.BigAutoField",
    "USE_TZ": True,
    "TIME_ZONE": "UTC",
    "SECRET_KEY": "ctxview-check: nothing is signed",
    "LOGGING_CONFIG": None,  # the host's logging is left as it is
    # The embedded server's Celery: no broker, tasks run when they are sent. Failures propagate to
    # ``enqueue_batch``, which logs them: the batch is then left pending, and the check says so.
    "CELERY_BROKER_URL": None,
    "CELERY_TASK_ALWAYS_EAGER": True,
    "CELERY_TASK_EAGER_PROPAGATES": True,
    "CELERY_TASK_IGNORE_RESULT": True,
    "CELERY_RESULT_BACKEND": None,
    # What ingest reads of the settings (ctxview/settings.py has the server's values).
    "CTXVIEW_INGEST_MAX_PENDING_BATCHES": 0,  # every batch is processed before the next is accepted
    "CTXVIEW_INGEST_MAX_BODY_BYTES": 1 << 40,
    "CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES": 1 << 40,
    "CTXVIEW_INGEST_MAX_INFLIGHT_BYTES": 1 << 40,
    "CTXVIEW_INGEST_RETRY_AFTER_SECONDS": 5,
    "CTXVIEW_INGEST_RATE_LIMIT": 0,
    "CTXVIEW_SWEEP_AFTER_SECONDS": 60,
}
PROJECT_SLUG = "check"


def analyse(exports: list[Export], contents: bool = False, isolated: bool = False) -> list[dict]:
    """The runs of ``exports``, each ``{"run", "calls", "findings"}`` as the read API gives them (and
    ``contents``: the text of each item by hash). ``isolated``: in a child process, whatever this
    process's Django is. Raises ``Unusable`` for an export the pipeline cannot store."""
    if isolated or _django_is_someone_elses():
        return _in_child(exports, contents)
    configure()
    return _analyse_here(exports, contents)


def _django_is_someone_elses() -> bool:
    from django.conf import settings

    return settings.configured and not getattr(settings, MARK, False)


def configure() -> None:
    """Configure Django for the engine, in this process (once; what ``analyse`` does first)."""
    import django
    from django.conf import settings

    if settings.configured:
        return
    settings.configure(**SETTINGS)
    django.setup()
    # ctxview's Celery app, which reads the CELERY_ settings above. It sets DJANGO_SETTINGS_MODULE for a
    # worker's sake; here settings are configured in code, and the variable must not leak into the
    # processes this one starts.
    before = os.environ.get("DJANGO_SETTINGS_MODULE")
    from ctxview import celery  # noqa: F401

    if before is None:
        os.environ.pop("DJANGO_SETTINGS_MODULE", None)
    import ingest.accept  # noqa: F401  (and with them every model the pipeline writes)
    import ingest.store  # noqa: F401


def _fresh_database() -> None:
    """An empty database: every table of the installed models made in the first check of the process,
    emptied in the next (closing an in-memory database would drop it, so Django never closes one)."""
    from django.apps import apps
    from django.core.management.color import no_style
    from django.db import connection

    existing = set(connection.introspection.table_names())
    with connection.schema_editor() as editor:
        for model in apps.get_models():
            if model._meta.db_table not in existing:
                editor.create_model(model)
    if existing:
        tables = connection.introspection.django_table_names(only_existing=True)
        connection.ops.execute_sql_flush(connection.ops.sql_flush(no_style(), tables, reset_sequences=True))


def _analyse_here(exports: list[Export], contents: bool) -> list[dict]:
    from ingest import accept, otlp
    from ingest.models import Project, RawBatch

    _fresh_database()
    project = Project.objects.create(slug=PROJECT_SLUG, name="ctxview check")
    last = 0
    for source, signal, message in _batches(exports):
        data = message.SerializeToString()
        # Autocommit: the batch commits inside ``accept``, and its processing runs on that commit.
        accept.accept(project, signal, data, otlp.PROTOBUF, wire_bytes=len(data))
        batch = RawBatch.objects.filter(id__gt=last).first()
        if batch is None:
            continue  # nothing valid in it (what was rejected is reported by the caller)
        last = batch.id
        if batch.status == RawBatch.Status.FAILED:
            raise Unusable(f"{source}: the pipeline could not store it ({batch.error})")
        if batch.status != RawBatch.Status.DONE:
            raise Unusable(f"{source}: the pipeline did not process it (its error is logged above)")
    return _runs(project, contents)


# What one stored batch holds at most: the receiver's default limit of a request body.
BATCH_BYTES = 16 * 1024 * 1024


def _batches(exports: list[Export]) -> Iterator[tuple[str, str, Message]]:
    """The exports, consecutive ones of a signal merged into one request up to ``BATCH_BYTES``, with the
    sources they came from.

    A file exporter writes a request per export, often of a span or a few: stored one by one, a 100-call
    run written a span a line took 3.4 times as long as merged. Merging changes nothing else: the
    pipeline makes of spans split into any batches, in any order, what one ordered pass makes
    (tests/ingest/test_concurrency.py), and tests/check/test_server.py compares a run sent to a server 7
    spans a request with the same spans checked here."""
    group: list[Export] = []
    size = 0
    for export in exports:
        bytes_ = export.message.ByteSize()
        if group and (export.signal != group[0].signal or size + bytes_ > BATCH_BYTES):
            yield _merged(group)
            group, size = [], 0
        group.append(export)
        size += bytes_
    if group:
        yield _merged(group)


def _merged(group: list[Export]) -> tuple[str, str, Message]:
    if len(group) == 1:
        return group[0].source, group[0].signal, group[0].message
    message = type(group[0].message)()
    for export in group:
        message.MergeFrom(export.message)  # the requests' resource spans (or logs), one after another
    return f"{group[0].source} to {group[-1].source}", group[0].signal, message


def _runs(project, contents: bool) -> list[dict]:
    from ingest.models import Content, Run

    found = []
    runs = Run.objects.filter(project=project, call_count__gt=0).select_related("project")
    for run in runs.order_by("started_at", "id"):
        if run.analysed_seq < run.call_count:
            raise Unusable(f"run {run.key}: {run.call_count - run.analysed_seq} calls were not analysed")
        calls = [call.to_dict(url="") for call in run.calls.filter(seq__gt=0).order_by("seq")]
        # In the API's order: call order, run-level findings last.
        findings = sorted(
            run.findings.all(), key=lambda row: (row.call_seq is None, row.call_seq or 0, row.id)
        )
        entry = {"run": run.to_dict(url=""), "calls": calls, "findings": [row.to_dict() for row in findings]}
        if contents:
            hashes = {item["hash"] for call in calls for item in call["items"]}
            entry["contents"] = dict(Content.objects.by_hash(project.id, hashes, "text"))
        found.append(entry)
    return found


# --- In a child process ---------------------------------------------------------------------------


def _in_child(exports: list[Export], contents: bool) -> list[dict]:
    env = {name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"}
    command = [sys.executable, "-m", "ctxview.check.engine", *(["--contents"] if contents else [])]
    done = subprocess.run(command, input=b"".join(_frames(exports)), capture_output=True, env=env)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise RuntimeError(f"the check's engine failed (exit status {done.returncode})") from None
    sys.stderr.write(done.stderr.decode(errors="replace"))
    if "unusable" in answer:
        raise Unusable(answer["unusable"])
    return answer["runs"]


def _frames(exports: Iterable[Export]) -> Iterable[bytes]:
    """One JSON line per export: where it was read, its signal and its protobuf bytes."""
    for export in exports:
        data = base64.b64encode(export.message.SerializeToString()).decode()
        yield json.dumps({"source": export.source, "signal": export.signal, "data": data}).encode() + b"\n"


def _read_frames(lines: Iterable[bytes]) -> list[Export]:
    from ingest import otlp

    exports = []
    for line in lines:
        frame = json.loads(line)
        message = otlp.load(frame["signal"], base64.b64decode(frame["data"]))
        exports.append(Export(frame["source"], frame["signal"], message))
    return exports


def main() -> int:
    """``python -m ctxview.check.engine [--contents]``: exports on stdin, ``{"runs": [...]}`` on stdout."""
    exports = _read_frames(line for line in sys.stdin.buffer if line.strip())
    try:
        runs = analyse(exports, contents="--contents" in sys.argv[1:])
    except Unusable as exc:
        json.dump({"unusable": str(exc)}, sys.stdout)
        return 0
    json.dump({"runs": runs}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
