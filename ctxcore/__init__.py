"""ctxview's pure core: the shared vocabulary, the catalogues of finding types and cache-break causes,
and the analyses. No Django, no Celery, no database, no I/O: the write side (``ingest``) and the read
side (``ctxview``) build on it, and the SDK shares its vocabulary."""
