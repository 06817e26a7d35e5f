"""Calls' items stored as ItemList rows: each list as what changed since its run's previous list.

A call's list is based on the list of the call before it in its run, as stored when the call is
written (the previous call of the same batch, or the stored one before the batch's first). A late call
is based on whatever preceded it then; the calls after it keep their bases, which never change (lists
are immutable), so renumbering a run leaves every list readable. A snapshot is stored every
``MAX_DEPTH + 1`` lists of a chain, or when most of the items are new; it keeps its base (not read:
the items that entered there stay findable, and their content referenced, while the snapshot is).
"""

import json
from collections import defaultdict
from collections.abc import Iterable

from django.db import connection
from django.db.models import Q

from ingest import compact
from ingest.bulk import insert_rows
from ingest.models import Call, ItemList

MAX_DEPTH = ItemList.MAX_DEPTH


def store(project_id: int, calls: Iterable[Call]) -> None:
    """Store the items set on these calls (``call.items = ...``) as lists and point the calls at them;
    the caller then saves the calls' ``item_list``."""
    changed = [call for call in calls if call._items_changed]
    if not changed:
        return
    by_run: dict[int, list[Call]] = defaultdict(list)
    for call in changed:
        by_run[call.run_id].append(call)
    postgresql = connection.vendor == "postgresql"
    previous = _stored_predecessors(by_run, {call.id for call in changed if call.id})
    bases = ItemList.objects.decoded(set(previous.values()))
    # PostgreSQL: the ids drawn from the sequence first, then one COPY. SQLite (embedded, one writer):
    # each list inserted as it is made, which gives it the id the next list of its chain is based on.
    ids = iter(_new_ids(sum(1 for call in changed if call._items)) if postgresql else ())
    stored: list[tuple[Call, dict]] = []
    for run_id, run_calls in by_run.items():
        base_id = previous.get(run_id)
        base = (base_id, *bases[base_id]) if base_id else None
        for call in sorted(run_calls, key=lambda call: (call.start_ns, call.span_id)):
            items = call._items
            call._items_changed = False
            if not items:
                call.item_list_id = None
                continue
            row = _encoded(project_id, base, items)
            if postgresql:
                row["id"] = next(ids)
            else:
                saved = ItemList(**row)
                saved.save(force_insert=True)
                row["id"] = saved.id
            base = (row["id"], row.get("depth", 0), items)
            stored.append((call, row))
    if postgresql:  # COPY of plain rows: the ORM's bulk_create builds and quotes every row (5% of a worker)
        insert_rows(ItemList, [row for _call, row in stored], on_conflict="fail", with_ids=True)
    for call, row in stored:
        call.item_list_id = row["id"]


def _encoded(project_id: int, base: tuple[int, int, list[dict]] | None, items: list[dict]) -> dict:
    """The ItemList row (attname -> value; what it leaves out takes the field's default) of ``items``."""
    if base is None:
        return {"project_id": project_id, "entered": items, "whole": compact.pack(items)}
    ops, entered = compact.encode(base[2], items)
    # A delta that holds most of the items saves little and costs a row to read: store it whole. A
    # snapshot keeps its base too, not to be read but so that what entered there stays findable.
    row = {"project_id": project_id, "base_id": base[0], "entered": entered}
    if base[1] >= MAX_DEPTH or len(entered) * 2 > len(items):
        return row | {"whole": compact.pack(items)}
    return row | {"depth": base[1] + 1, "ops": ops}


def _stored_predecessors(by_run: dict[int, list[Call]], rewritten: set[int]) -> dict[int, int]:
    """For each run, the list of its stored call just before the first of these calls (if it has one):
    one query for every run of the batch on PostgreSQL, one per run on SQLite."""
    firsts = [
        (run_id, first.start_ns, first.span_id)
        for run_id, run_calls in by_run.items()
        for first in [min(run_calls, key=lambda call: (call.start_ns, call.span_id))]
    ]
    if connection.vendor != "postgresql":
        found = {}
        for run_id, start_ns, span_id in firsts:
            before = (
                Call.objects.filter(run_id=run_id, item_list_id__isnull=False)
                .filter(Q(start_ns__lt=start_ns) | Q(start_ns=start_ns, span_id__lt=span_id))
                .exclude(id__in=rewritten)
                .order_by("-start_ns", "-span_id")
                .values_list("item_list_id", flat=True)
                .first()
            )
            if before:
                found[run_id] = before
        return found
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT first.run_id, ("
            " SELECT call.item_list_id FROM ingest_call call"
            " WHERE call.run_id = first.run_id AND call.item_list_id IS NOT NULL"
            " AND (call.start_ns < first.start_ns"
            "  OR (call.start_ns = first.start_ns AND call.span_id < first.span_id))"
            " AND NOT (call.id = ANY(%s::bigint[]))"
            " ORDER BY call.start_ns DESC, call.span_id DESC LIMIT 1"
            ") FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) AS first(run_id, start_ns, span_id)",
            [
                sorted(rewritten),
                [run_id for run_id, _, _ in firsts],
                [start_ns for _, start_ns, _ in firsts],
                [span_id for _, _, span_id in firsts],
            ],
        )
        return {run_id: list_id for run_id, list_id in cursor.fetchall() if list_id}


def _new_ids(count: int) -> list[int]:
    if not count:
        return []
    with connection.cursor() as cursor:
        # The sequence looked up once, not for each id (1.8 -> 0.3 ms for a batch's 512 ids).
        cursor.execute(
            "WITH sequence AS MATERIALIZED ("
            "  SELECT pg_get_serial_sequence('ingest_itemlist', 'id')::regclass AS name) "
            "SELECT nextval(sequence.name) FROM sequence, generate_series(1, %s)",
            [count],
        )
        return [row[0] for row in cursor.fetchall()]


def collect(project_id: int, list_ids: Iterable[int] | None = None) -> set[str]:
    """Delete the lists (of ``list_ids``, or all the project's) that no call and no list needs any more,
    and then their bases that became unneeded; returns the content hashes the deleted lists held."""
    lists = ItemList.objects.filter(project_id=project_id)
    candidates = set(list_ids) if list_ids is not None else None
    hashes: set[str] = set()
    while candidates is None or candidates:
        scope = lists if candidates is None else lists.filter(id__in=candidates)
        unneeded = scope.exclude(
            id__in=Call.objects.filter(project_id=project_id, item_list__isnull=False).values("item_list_id")
        ).exclude(id__in=lists.filter(base__isnull=False).values("base_id"))
        gone = list(unneeded.values_list("id", "base_id", "entered"))
        if not gone:
            break
        ItemList.objects.filter(id__in=[list_id for list_id, _, _ in gone]).delete()
        # The other items of these lists entered their bases: reported when those go.
        hashes.update(item["hash"] for _, _, entered in gone for item in entered)
        candidates = {base_id for _, base_id, _ in gone if base_id}
    return hashes


def runs_holding(project_ids, wanted: dict[str, str]):
    """Ids of the runs with a call whose window held an item matching every field of ``wanted``."""
    if connection.vendor == "postgresql":
        # The lists an item entered (GIN index on entered), then the lists based on them, then their calls.
        project_ids = list(project_ids)
        with connection.cursor() as cursor:
            cursor.execute(
                "WITH RECURSIVE held(id) AS ("
                " SELECT id FROM ingest_itemlist WHERE project_id = ANY(%s) AND entered @> %s::jsonb"
                " UNION SELECT list.id FROM ingest_itemlist list JOIN held ON list.base_id = held.id"
                ") SELECT DISTINCT run_id FROM ingest_call"
                " WHERE project_id = ANY(%s) AND item_list_id IN (SELECT id FROM held)",
                [project_ids, json.dumps([wanted]), project_ids],
            )
            return [run_id for (run_id,) in cursor.fetchall()]
    # SQLite (embedded) has no JSON containment: scan, which is fine at a laptop's scale.
    found = set()
    for call in Call.objects.filter(project_id__in=project_ids).only("run_id", "item_list").iterator():
        if any(all(item.get(field) == value for field, value in wanted.items()) for item in call.items):
            found.add(call.run_id)
    return list(found)


def first_seqs_holding(run_ids: Iterable[int], wanted: dict[str, str]) -> dict[int, int]:
    """Per run, the seq of its first numbered call whose window held an item matching ``wanted``.

    On PostgreSQL: the first call whose list the item entered (GIN index on entered); a call before it
    could hold the item only through a base that entered it, whose call comes earlier still."""
    run_ids = list(run_ids)
    if not run_ids:
        return {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT call.run_id, MIN(call.seq) FROM ingest_call call"
                " JOIN ingest_itemlist list ON call.item_list_id = list.id"
                " WHERE call.run_id = ANY(%s) AND call.seq IS NOT NULL AND list.entered @> %s::jsonb"
                " GROUP BY call.run_id",
                [run_ids, json.dumps([wanted])],
            )
            return dict(cursor.fetchall())
    found: dict[int, int] = {}
    calls = Call.objects.filter(run_id__in=run_ids, seq__isnull=False).order_by("run_id", "seq")
    for call in calls.only("run_id", "seq", "item_list").iterator(chunk_size=200):
        if call.run_id not in found and any(
            all(item.get(field) == value for field, value in wanted.items()) for item in call.items
        ):
            found[call.run_id] = call.seq
    return found
