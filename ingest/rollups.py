"""Per-scope, per-minute roll-ups of analysed calls, written with the analysis (the monitors read them).

A roll-up row sums the calls of one run that started in one minute, for one service, model and agent:
calls, billed input, the cache figures of the hit rate, cost, output, the peak window (in tokens, and as
a share of the call's context limit where the call states one), and the breaks by
cause and the findings by type (each with its first call, item and, for a break, the bytes that differ).
``FirstSeen`` keeps, per scope, the first call where each cause and finding type appeared.

Why the rows are keyed by run (and by the run's checkpoint segment) rather than summed per project and
minute: a run is analysed again from a checkpoint when it changes (a late call, content that came later,
new prices), and its calls' earlier contributions must go, not be counted twice. What a call contributed
cannot be read back once its analysis is replaced (it may even have moved to another run), so the rows
are kept where they can be taken back whole: ``invalidate`` and every analysis that restarts after call
``after`` delete the run's segments past ``after`` (a restart is always at a checkpoint, every
``SEGMENT`` calls, or where the previous analysis ended, past which no row exists), then the analysis
writes them again. It also means a batch writes only rows of the runs it holds locked: no row shared by
two workers, no lock wait added to ingest. The monitors sum the rows of a window (a few per active run
and minute), which grows with the runs, never with their calls.

The run-level findings (``finalise_run``'s: unused tools, quadratic history) are not in the minute rows
(they are written anew at the end of every analysis); they are in ``FirstSeen``.
"""

import math
from datetime import UTC, datetime

from django.db import models
from django.db.models import Q
from django.utils import timezone as dj_timezone

from ctxcore.analysis import accounting, price_for

SEGMENT = 32  # ingest.analyse.CHECKPOINT_EVERY: a restart is at a multiple of it
SCOPE_FIELDS = ("service", "model", "agent")
SUMS = (
    "calls",
    "prompt_calls",
    "billed_input",
    "hit_calls",
    "hit_prompt",
    "hit_read",
    "output",
    "priced_calls",
)


class Rollup(models.Model):
    """What one run's calls of one minute and scope add up to (see the module's docstring)."""

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, db_index=False)
    run = models.ForeignKey("ingest.Run", on_delete=models.CASCADE, db_index=False, related_name="+")
    segment = models.IntegerField()  # (seq - 1) // SEGMENT
    minute = models.DateTimeField()
    service = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    calls = models.IntegerField(default=0)
    prompt_calls = models.IntegerField(default=0)  # calls that reported their prompt total
    billed_input = models.BigIntegerField(default=0)
    hit_calls = models.IntegerField(default=0)  # calls that reported their cache reads (and prompt total)
    hit_prompt = models.BigIntegerField(default=0)  # prompt totals of the calls that reported cache reads
    hit_read = models.BigIntegerField(default=0)
    output = models.BigIntegerField(default=0)
    priced_calls = models.IntegerField(default=0)
    cost_usd = models.FloatField(default=0.0)
    first_ns = models.BigIntegerField(null=True)  # the start of its earliest call
    max_input = models.BigIntegerField(null=True)  # the largest billed input of one call
    peak_window = models.BigIntegerField(null=True)
    peak_seq = models.IntegerField(null=True)
    # The largest window as a share of its call's context limit, of the calls whose limit is known.
    peak_share = models.FloatField(null=True)
    share_seq = models.IntegerField(null=True)
    # {cause: {"n", "tokens", "cost", "last_at", "first": {"seq", "at", "item", "kind", "bytes"}}}
    breaks = models.JSONField(default=dict)
    findings = models.JSONField(default=dict)  # {type: {"n", "last_at", "first": {"seq", "at", "item"}}}

    class Meta:
        app_label = "ingest"
        constraints = [
            models.UniqueConstraint(
                fields=["run", "segment", "minute", "service", "model", "agent"], name="rollup_unique"
            )
        ]
        indexes = [models.Index(fields=["project", "minute"], name="rollup_project_minute")]

    def key(self) -> tuple:
        return (self.project_id, self.run_id, self.segment, self.minute, self.service, self.model, self.agent)


class FirstSeen(models.Model):
    """The first call where a cause of cache breaks or a finding type appeared in a scope."""

    class Kind(models.TextChoices):
        CAUSE = "cause"
        FINDING = "finding"

    project = models.ForeignKey("ingest.Project", on_delete=models.CASCADE, db_index=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=60)
    service = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    run = models.ForeignKey("ingest.Run", null=True, on_delete=models.SET_NULL, related_name="+")
    call_seq = models.IntegerField(null=True)
    call_at = models.DateTimeField(null=True)
    item_id = models.CharField(max_length=500, blank=True)
    item_kind = models.CharField(max_length=40, blank=True)
    detail = models.JSONField(default=dict)  # the bytes that differ, for a cause
    seen_at = models.DateTimeField(default=dj_timezone.now)  # when ctxview saw it (not the call's time)

    class Meta:
        app_label = "ingest"
        constraints = [
            models.UniqueConstraint(
                fields=["project", "kind", "name", "service", "model", "agent"], name="firstseen_unique"
            )
        ]


# --- One call's contribution, and adding contributions -----------------------------------------------


def minute_of(start_ns: int) -> datetime:
    return datetime.fromtimestamp(start_ns // 60_000_000_000 * 60, tz=UTC)


def empty() -> dict:
    return {
        **dict.fromkeys(SUMS, 0),
        "cost_usd": 0.0,
        "first_ns": None,
        "max_input": None,
        "peak_window": None,
        "peak_seq": None,
        "peak_share": None,
        "share_seq": None,
        "breaks": {},
        "findings": {},
    }


def contribution(call, cache: dict, window: int | None, findings: list[dict], cost, kinds: dict) -> dict:
    """What one analysed call adds: ``call`` has the stored call's fields (seq, usage, start); ``cost``
    is ``accounting.call_cost``'s (None: unpriced); ``kinds``: item id -> kind."""
    value = empty()
    usage = call.usage_dict()
    prompt, read = usage["prompt_total"], usage["cache_read"]
    value["calls"], value["first_ns"], at = 1, call.start_ns, call.start_ns
    if prompt is not None:
        value.update(prompt_calls=1, billed_input=prompt, max_input=prompt)
        if read is not None:
            value.update(hit_calls=1, hit_prompt=prompt, hit_read=read)
    value["output"] = usage["output"] or 0
    if cost is not None:
        value.update(priced_calls=1, cost_usd=cost[0])
    if window is not None:
        value.update(peak_window=window, peak_seq=call.seq)
        limit = (getattr(call, "budget", None) or {}).get("limit")
        if limit:
            value.update(peak_share=window / limit, share_seq=call.seq)
    if cache.get("broke"):
        item = cache.get("invalidator_item_id")
        first = {
            "seq": call.seq,
            "at": at,
            "item": item,
            "kind": kinds.get(item),
            "bytes": (cache.get("detail") or {}).get("bytes"),
        }
        value["breaks"] = {
            cache["cause"]: {
                "n": 1,
                "tokens": cache.get("tokens_rewritten") or 0,
                "cost": cache.get("cost_usd") or 0.0,
                "last_at": at,
                "first": first,
            }
        }
    for finding in findings:
        entry = value["findings"].setdefault(
            finding["type"],
            {
                "n": 0,
                "last_at": at,
                "first": {"seq": call.seq, "at": at, "item": finding.get("item_id") or None},
            },
        )
        entry["n"] += 1
    return value


def _earlier(a: dict, b: dict) -> dict:
    return a if (a.get("at") or 0, a.get("seq") or 0) <= (b.get("at") or 0, b.get("seq") or 0) else b


def merge(into: dict, more: dict) -> dict:
    """``into`` with ``more`` added (both as ``empty()`` makes them); ``into`` is changed."""
    for name in SUMS:
        into[name] += more[name]
    into["cost_usd"] += more["cost_usd"]
    if more["first_ns"] is not None:
        into["first_ns"] = min(into["first_ns"] or more["first_ns"], more["first_ns"])
    if more["max_input"] is not None:
        into["max_input"] = max(into["max_input"] or 0, more["max_input"])
    if more["peak_window"] is not None and (
        into["peak_window"] is None or more["peak_window"] > into["peak_window"]
    ):
        into["peak_window"], into["peak_seq"] = more["peak_window"], more["peak_seq"]
    if more["peak_share"] is not None and (
        into["peak_share"] is None or more["peak_share"] > into["peak_share"]
    ):
        into["peak_share"], into["share_seq"] = more["peak_share"], more["share_seq"]
    for cause, entry in more["breaks"].items():
        mine = into["breaks"].get(cause)
        if mine is None:
            into["breaks"][cause] = {**entry}
        else:
            into["breaks"][cause] = {
                "n": mine["n"] + entry["n"],
                "tokens": mine["tokens"] + entry["tokens"],
                "cost": mine["cost"] + entry["cost"],
                "last_at": max(mine["last_at"], entry["last_at"]),
                "first": _earlier(mine["first"], entry["first"]),
            }
    for kind, entry in more["findings"].items():
        mine = into["findings"].get(kind)
        into["findings"][kind] = (
            {**entry}
            if mine is None
            else {
                "n": mine["n"] + entry["n"],
                "last_at": max(mine["last_at"], entry["last_at"]),
                "first": _earlier(mine["first"], entry["first"]),
            }
        )
    return into


def values_of(row: Rollup) -> dict:
    return {name: getattr(row, name) for name in empty()}


def segment_after(after: int) -> int:
    """The first segment holding only calls after ``after``."""
    return math.ceil(after / SEGMENT)


def withdraw(run_id: int, after: int) -> None:
    """Take back what the run's calls after ``after`` contributed (the segments that hold only them)."""
    Rollup.objects.filter(run_id=run_id, segment__gte=segment_after(after)).delete()


class RollupWrites:
    """A batch's roll-up writes, gathered with the analysis's and written in its transaction."""

    def __init__(self) -> None:
        self.withdrawn: list[tuple[int, int]] = []
        self.rows: dict[tuple, dict] = {}
        self.first: dict[tuple, dict] = {}

    def withdraw_after(self, run_id: int, after: int) -> None:
        self.withdrawn.append((run_id, after))

    def add(self, run, call, entry, outcome: dict, config) -> None:
        """One analysed call of ``run`` (``entry``: its CallInput; ``outcome``: its analysis as a dict)."""
        cache, findings = outcome["cache"], outcome["findings"]
        kinds = {item.id: item.kind for item in entry.items}
        cost = accounting.call_cost(entry, price_for(entry.model, config.prices))
        window = outcome["buckets"].get("total")
        value = contribution(call, cache, window, findings, cost, kinds)
        scope = (run.service_name[:200], call.model[:200], call.agent_name[:200])
        key = (run.project_id, run.id, (call.seq - 1) // SEGMENT, minute_of(call.start_ns), *scope)
        merge(self.rows.setdefault(key, empty()), value)
        at = {"run": run.id, "seq": call.seq, "at": call.start_ns}
        if cache.get("broke"):
            first = value["breaks"][cache["cause"]]["first"]
            self.see(run.project_id, FirstSeen.Kind.CAUSE, cache["cause"], scope, {**at, **first})
        for finding in findings:
            self.see(
                run.project_id,
                FirstSeen.Kind.FINDING,
                finding["type"],
                scope,
                {**at, "item": finding.get("item_id")},
            )

    def add_run_findings(self, run, findings: list[dict], last_ns: int | None) -> None:
        """Run-level findings: only into FirstSeen (scoped by the run's service)."""
        for finding in findings:
            at = {"run": run.id, "seq": None, "at": last_ns or 0, "item": finding.get("item_id")}
            self.see(
                run.project_id, FirstSeen.Kind.FINDING, finding["type"], (run.service_name[:200], "", ""), at
            )

    def see(self, project_id: int, kind: str, name: str, scope: tuple, at: dict) -> None:
        key = (project_id, kind, name, *scope)
        known = self.first.get(key)
        if known is None or at["at"] < known["at"]:
            self.first[key] = at

    def flush(self) -> None:
        if self.withdrawn:
            stale = Q()
            for run_id, after in self.withdrawn:
                stale |= Q(run_id=run_id, segment__gte=segment_after(after))
            Rollup.objects.filter(stale).delete()
        if self.rows:
            self._write_rows()
        if self.first:
            self._write_first()
        self.withdrawn, self.rows, self.first = [], {}, {}

    def _write_rows(self) -> None:
        # The rows of these segments that exist (a run continued within a segment): added to, rewritten.
        segments = {(key[1], key[2]) for key in self.rows}
        found = Q()
        for run_id, segment in segments:
            found |= Q(run_id=run_id, segment=segment)
        existing = list(Rollup.objects.filter(found))
        for row in existing:
            if row.key() in self.rows:
                self.rows[row.key()] = merge(values_of(row), self.rows[row.key()])
        Rollup.objects.filter(id__in=[row.id for row in existing if row.key() in self.rows]).delete()
        Rollup.objects.bulk_create(
            [
                Rollup(
                    project_id=key[0],
                    run_id=key[1],
                    segment=key[2],
                    minute=key[3],
                    service=key[4],
                    model=key[5],
                    agent=key[6],
                    **value,
                )
                for key, value in sorted(self.rows.items(), key=lambda pair: pair[0][:3])
            ],
            batch_size=500,
        )

    def _write_first(self) -> None:
        projects = {key[0] for key in self.first}
        names = {key[2] for key in self.first}
        known = set(
            FirstSeen.objects.filter(project_id__in=projects, name__in=names).values_list(
                "project_id", "kind", "name", "service", "model", "agent"
            )
        )
        new = [
            FirstSeen(
                project_id=key[0],
                kind=key[1],
                name=key[2],
                service=key[3],
                model=key[4],
                agent=key[5],
                run_id=at["run"],
                call_seq=at["seq"],
                call_at=datetime.fromtimestamp(at["at"] / 1e9, tz=UTC) if at["at"] else None,
                item_id=(at.get("item") or "")[:500],
                item_kind=(at.get("kind") or "")[:40],
                detail={"bytes": at["bytes"]} if at.get("bytes") else {},
            )
            for key, at in sorted(self.first.items())
            if key not in known
        ]
        if new:
            # A scope's first sighting is rare: two workers inserting the same one at once is rarer, and the
            # second's row is skipped.
            FirstSeen.objects.bulk_create(new, ignore_conflicts=True)
