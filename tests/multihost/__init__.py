"""The multi-host test: ctxview over network namespaces joined by a bridge (see test_multihost.py)."""
