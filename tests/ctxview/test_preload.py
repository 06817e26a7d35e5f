"""A web process imports the request path with the WSGI application, so that gunicorn's master does it
once before forking (ctxview/preload.py), not each worker on its first requests."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports the application, then serves a request of the page, the API and the receiver (a GET: no
# database), and prints the modules that the requests imported.
FIRST_REQUESTS = """
import json, sys
import ctxview.wsgi
from django.test import Client
before = set(sys.modules)
client = Client(HTTP_HOST="127.0.0.1")
statuses = [client.get(path).status_code for path in ("/v1/traces", "/api/v1/", "/login/")]
print(json.dumps({"statuses": statuses, "imported": sorted(set(sys.modules) - before)}))
"""


def test_the_first_requests_import_nothing_of_ctxview_django_or_the_task_queue(tmp_path):
    # A broker URL, as in production: the task producer's modules must be loaded too (none connects).
    env = os.environ | {"CTXVIEW_DATA_DIR": str(tmp_path), "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-c", FIRST_REQUESTS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.splitlines()[-1])
    assert answer["statuses"][0] == 405  # the receiver answered: the URLconf and views were in use
    ours = ("ctxview", "ctxcore", "ingest", "django", "kombu", "celery.app.amqp", "celery.canvas")
    late = [name for name in answer["imported"] if name.split(".")[0] in ours or name in ours]
    assert late == []
