"""The Celery app. Settings are read from Django settings with the ``CELERY_`` prefix."""

import gc
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxview.settings")

app = Celery("ctxview")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_prerun.connect
@signals.task_postrun.connect
def close_old_connections(task=None, **kwargs) -> None:
    """Around each task, as around a request: drop the connections past CONN_MAX_AGE or broken (with
    CELERY_DB_REUSE_MAX, Celery no longer closes every one). Eager tasks run inside the caller's."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections as close

    close()


@signals.worker_init.connect
def preload(**kwargs) -> None:
    """Load in the worker's main process what every task needs, before the pool forks: pool processes
    share it instead of each loading it on its first task (the tokenizer alone takes ~0.1 s)."""
    from ingest.malloc import return_large_blocks

    return_large_blocks()  # inherited by the pool's processes
    import ingest.store  # noqa: F401  (and with it normalisation, the analyses, the models)
    from ingest import tokens

    tokens.count("warm up")
    freeze_before_fork()


def freeze_before_fork() -> None:
    """Keep the garbage collector off what is loaded so far, in every process forked from here: a
    collection writes into each object it visits, copying every shared page into each child."""
    gc.collect()
    gc.freeze()
