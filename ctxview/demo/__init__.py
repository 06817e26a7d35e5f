"""The demo: four deterministic agent runs sent through the ctxview SDK and the real OTLP path.

Each story (incident, migration, timeout, research) tells one failure the analyses are meant to find; see the
story modules' docstrings.
"""

import ctxview_sdk
from ctxview.demo import incident, migration, research, timeout

STORIES = (incident, migration, timeout, research)


def send(url: str, key: str, skip: set[str] = frozenset()) -> dict[str, int]:
    """Send every story whose run id is not in ``skip``; returns calls sent per run id."""
    sent = {}
    for story in STORIES:
        if story.RUN_ID in skip:
            continue
        ctxview_sdk.configure(
            url, key=key, service_name=story.SERVICE, send_content=True, content_limit=65536, timeout=30.0
        )
        recorder = story.record()
        if not ctxview_sdk.flush(timeout=120.0):
            raise RuntimeError(f"the demo run {story.RUN_ID} could not be delivered to {url}")
        sent[story.RUN_ID] = recorder.calls
    ctxview_sdk.shutdown(timeout=30.0)
    return sent
