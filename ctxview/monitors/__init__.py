"""Monitors: a project's watches over the per-minute roll-ups that ingest writes with the analysis
(``ingest.rollups``), evaluated every minute (``engine.evaluate``, Celery beat's ``monitors.evaluate``);
an episode (ok → firing → resolved) carries its cause, and its notifications leave through
``ctxview.outbound`` (``channels``)."""
