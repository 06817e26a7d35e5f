"""Celery tasks of ctxview, where Celery's discovery looks for them: the monitors' evaluation tick (beat,
every minute) and their deliveries, defined with the engine (``ctxview.monitors.engine``)."""

from ctxview.monitors.engine import deliver_task, evaluate_task

__all__ = ["deliver_task", "evaluate_task"]
