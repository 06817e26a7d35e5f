"""Conflicting versions in one call, and stale versions against what the run has already used.

The version index keeps, per source, the rank of each version by when the run first included it:
a version is *stale* when a version first seen later was already included earlier in the run. It keeps
the latest ``VERSIONS_PER_SOURCE`` versions of each source, so its size is bounded by the number of
distinct sources; an evicted (very old) version that comes back is taken as unseen.
"""

from collections.abc import Mapping, Sequence

from ctxcore.catalogue import finding_type
from ctxcore.vocabulary import Item

VERSIONS_PER_SOURCE = 16
CONFLICTING_VERSIONS = finding_type("conflicting_versions").name
SUPERSEDED_INCLUDED = finding_type("superseded_included").name
STALE_VERSION = finding_type("stale_version").name


def _newest(entry: Mapping) -> str:
    return max(entry["ranks"], key=entry["ranks"].get)


def call_conflicts(items: Sequence[Item], index: Mapping[str, Mapping]) -> list[dict]:
    """Same source with different versions, superseded items kept, and versions older than already used."""
    conflicts = []
    by_source: dict[str, list[Item]] = {}
    for item in items:
        if item.source is not None and item.version is not None:
            by_source.setdefault(item.source, []).append(item)
    for source, group in by_source.items():
        versions = list(dict.fromkeys(item.version for item in group))
        if len(versions) > 1:
            conflicts.append(
                {
                    "type": CONFLICTING_VERSIONS,
                    "source": source,
                    "versions": versions,
                    "item_ids": [item.id for item in group],
                }
            )

    included = {item.id for item in items}
    for item in items:
        for superseded in item.supersedes:
            if superseded in included and superseded != item.id:
                conflicts.append(
                    {"type": SUPERSEDED_INCLUDED, "item_id": superseded, "superseded_by": item.id}
                )

    for item in items:
        entry = index.get(item.source) if item.source is not None else None
        if entry is None or item.version not in entry["ranks"]:
            continue
        newest = _newest(entry)
        if entry["ranks"][item.version] < entry["ranks"][newest]:
            conflicts.append(
                {
                    "type": STALE_VERSION,
                    "item_id": item.id,
                    "source": item.source,
                    "version": item.version,
                    "newest_version": newest,
                }
            )
    return conflicts


def updated_index(index: Mapping[str, Mapping], items: Sequence[Item]) -> dict:
    """The version index after a call: versions seen for the first time rank after all others."""
    changed: dict[str, dict] = {}
    for item in items:
        if item.source is None or item.version is None:
            continue
        entry = changed.get(item.source) or index.get(item.source) or {"next": 0, "ranks": {}}
        if item.version in entry["ranks"]:
            continue
        ranks = {**entry["ranks"], item.version: entry["next"]}
        if len(ranks) > VERSIONS_PER_SOURCE:
            del ranks[min(ranks, key=ranks.get)]
        changed[item.source] = {"next": entry["next"] + 1, "ranks": ranks}
    return {**index, **changed} if changed else dict(index)
