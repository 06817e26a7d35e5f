"""gunicorn for ctxview: ``gunicorn ctxview.wsgi:application -c deploy/gunicorn.conf.py``.

Serve it behind deploy/nginx (docker-compose.yml does): its threads read requests one at a time, so
clients that trickle their headers or bodies would hold them all; nginx holds those clients instead.
GUNICORN_CMD_ARGS (and the command line) override what is set here.
"""

import os

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
# A worker process per core, a few threads each: requests mostly wait on the database.
workers = int(os.environ.get("WEB_CONCURRENCY", "4"))
threads = 4
max_requests = 5000
max_requests_jitter = 500
timeout = 60
# Requests come from nginx over a kept-alive connection (its upstream keepalive).
keepalive = 30
# Import the app (Django, the models, normalisation, the analyses) in the master, before it forks the
# workers: they share those pages instead of each importing its own copy (issue 19: peak PSS). Importing
# opens no database or broker connection, so nothing open is shared across the fork.
preload_app = True


def when_ready(server) -> None:
    """Without a broker, tasks run in the web workers: load the tokenizer once, before they fork."""
    from django.conf import settings

    from ctxview.celery import freeze_before_fork

    if settings.CELERY_TASK_ALWAYS_EAGER:
        from ingest import tokens

        tokens.count("warm up")
    freeze_before_fork()
