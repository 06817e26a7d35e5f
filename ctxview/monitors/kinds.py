"""What each kind of monitor checks, read from the roll-ups of its scope (never from the calls).

A kind's ``check`` says whether its condition holds now and, when it does, what set it off (``cause``:
the cause of cache breaks or finding type, its first run, call and item, the bytes that differ) and the
figures behind it. The first-seen kinds (a cause of cache breaks or a finding type seen for the first
time in the scope) read ``FirstSeen`` past the monitor's cursor, and clear once the scope has gone
quiet: enough clean calls after the last sighting, or a quiet spell.

What a tick reads must not grow with the calls stored: the figures of a window are summed in the
database, and only the rows that hold a break or a finding come into Python (their JSON names the
cause); a 7-day baseline is summed once an hour (``baseline``), not every tick.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Max, Q, Sum

from ctxview.models import Label, Monitor
from ingest.rollups import SUMS, FirstSeen, Rollup, empty, merge

Kind = Monitor.Kind

# Each kind's parameters: name -> (type, default, minimum, maximum). None: optional, no default.
PARAMS: dict[str, dict[str, tuple]] = {
    Kind.CACHE_BREAK_CAUSE: {
        "cause": (str, None, None, None),
        "cost_usd_above": (float, None, 0, 1e9),
        "window_minutes": (int, 30, 1, 10080),
        "quiet_calls": (int, 3, 1, 100000),
        "quiet_minutes": (int, 30, 1, 10080),
    },
    Kind.FINDING_TYPE: {
        "type": (str, None, None, None),
        "quiet_calls": (int, 3, 1, 100000),
        "quiet_minutes": (int, 30, 1, 10080),
    },
    Kind.HIT_RATE_DROP: {
        "below": (float, None, 0, 1),
        "drop_points": (float, None, 0, 100),
        "window_minutes": (int, 30, 1, 10080),
        "baseline_days": (int, 7, 1, 90),
        "min_calls": (int, 5, 1, 100000),
    },
    Kind.COST_SPIKE: {
        "above_usd": (float, None, 0, 1e9),
        "times_baseline": (float, None, 1, 1000),
        "per": (str, "window", None, None),  # window | run
        "input_tokens_above": (int, None, 1, 10**9),
        "window_minutes": (int, 60, 1, 10080),
        "baseline_days": (int, 7, 1, 90),
    },
    Kind.WINDOW_SIZE: {
        "above_tokens": (int, None, 1, 10**9),
        "above_percent": (float, None, 1, 1000),  # of the call's context limit, where it is stated
        "window_minutes": (int, 30, 1, 10080),
    },
}


def param(monitor: Monitor, name: str):
    return monitor.params.get(name, PARAMS[monitor.kind][name][1])


@dataclass
class Verdict:
    firing: bool
    cause: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)
    cursor: int | None = None  # the first-seen kinds: the FirstSeen id looked at up to


SCOPE = ("service", "model", "agent", "label")


def scoped(monitor: Monitor):
    rows = Rollup.objects.filter(project_id=monitor.project_id)
    for name in ("service", "model", "agent"):
        if getattr(monitor, name):
            rows = rows.filter(**{name: getattr(monitor, name)})
    if monitor.label:
        rows = rows.filter(run_id__in=_labelled(monitor))
    return rows


def _labelled(monitor: Monitor):
    return Label.objects.filter(project_id=monitor.project_id, name=monitor.label).values("run_id")


def minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def window(monitor: Monitor, now: datetime, minutes: int):
    """The rows of the last ``minutes`` whole minutes and the current one."""
    return scoped(monitor).filter(minute__gt=minute(now) - timedelta(minutes=minutes), minute__lte=now)


def sums(rows) -> dict:
    """The rows' counts added up in the database (no JSON read)."""
    found = rows.aggregate(
        **{name: Sum(name) for name in (*SUMS, "cost_usd")},
        max_input=Max("max_input"),
        peak_window=Max("peak_window"),
    )
    # The largest figures stay unknown (None) where no call reported one.
    return {
        name: value if name in ("max_input", "peak_window") else value or 0 for name, value in found.items()
    }


def tally(rows, events: tuple[str, ...] = ("breaks",)) -> dict:
    """The rows added up: counts in the database; the JSON of ``events`` ("breaks", "findings") read
    only from the rows that hold some, each entry's ``first`` naming its run and minute."""
    total = {**sums(rows), "breaks": {}, "findings": {}}
    holding = Q()
    for name in events:
        holding |= ~Q(**{name: {}})
    found = empty()
    for row in rows.filter(holding).values("run_id", "minute", *events):
        value = empty()
        for name in events:
            value[name] = {
                key: {
                    **entry,
                    "first": {**entry["first"], "run": row["run_id"], "minute": row["minute"].isoformat()},
                }
                for key, entry in row[name].items()
            }
        merge(found, value)
    total.update(breaks=found["breaks"], findings=found["findings"])
    return total


BASELINE_SUMS = ("hit_prompt", "hit_read", "cost_usd")


def _baseline_sums(rows) -> dict:
    found = rows.aggregate(**{name: Sum(name) for name in BASELINE_SUMS})
    return {name: value or 0 for name, value in found.items()}


def baseline(monitor: Monitor, start: datetime) -> dict:
    """The scope's ``BASELINE_SUMS`` over the ``baseline_days`` days before ``start``, exactly.

    Summing days of roll-ups every tick grows with the calls of those days. The sums over the whole hours
    ``(hour - days, hour]`` (``hour``: ``start`` to the hour) are kept on the monitor and taken again
    when the hour or the scope changes; a tick adds the minutes since ``hour`` and takes off the ones the
    baseline has left behind, under an hour of rows each. A roll-up rewritten for one of the kept hours
    (a run analysed again) is counted at the next hour."""
    days = timedelta(days=param(monitor, "baseline_days"))
    hour = start.replace(minute=0, second=0, microsecond=0)
    key = "|".join((hour.isoformat(), str(days.days), *(getattr(monitor, name) for name in SCOPE)))
    if monitor.baseline.get("key") != key:
        kept = _baseline_sums(scoped(monitor).filter(minute__gt=hour - days, minute__lte=hour))
        monitor.baseline = {"key": key, **kept}
    added = _baseline_sums(scoped(monitor).filter(minute__gt=hour, minute__lte=start))
    left = _baseline_sums(scoped(monitor).filter(minute__gt=hour - days, minute__lte=start - days))
    return {name: monitor.baseline[name] + added[name] - left[name] for name in BASELINE_SUMS}


def hit_rate(figures: dict) -> float | None:
    return figures["hit_read"] / figures["hit_prompt"] if figures["hit_prompt"] else None


def top_break(total: dict, names: set[str] | None = None) -> dict:
    """The costliest cause of breaks (among ``names``), with its first break."""
    candidates = [(name, entry) for name, entry in total["breaks"].items() if names is None or name in names]
    if not candidates:
        return {}
    name, entry = max(candidates, key=lambda pair: (pair[1]["cost"], pair[1]["n"], pair[0]))
    return cause_of("cause", name, entry)


def cause_of(kind: str, name: str, entry: dict) -> dict:
    first = entry["first"]
    return {
        "type": kind,
        "name": name,
        "run": first.get("run"),
        "seq": first.get("seq"),
        "item": first.get("item"),
        "item_kind": first.get("kind"),
        "bytes": first.get("bytes"),
    }


def figures(total: dict) -> dict:
    rate = hit_rate(total)
    return {
        "calls": total["calls"],
        "billed_input": total["billed_input"],
        "cost_usd": round(total["cost_usd"], 6),
        "hit_rate": round(rate, 4) if rate is not None else None,
        "peak_window": total["peak_window"],
        "breaks": {
            name: {"n": e["n"], "tokens": e["tokens"], "cost_usd": round(e["cost"], 6)}
            for name, e in total["breaks"].items()
        },
    }


# --- The first-seen kinds ----------------------------------------------------------------------------


def _first_seen_kind(monitor: Monitor) -> tuple[str, str, str | None]:
    if monitor.kind == Kind.CACHE_BREAK_CAUSE:
        return FirstSeen.Kind.CAUSE, "breaks", monitor.params.get("cause")
    return FirstSeen.Kind.FINDING, "findings", monitor.params.get("type")


def first_seen(monitor: Monitor) -> Verdict:
    """Sightings past the cursor that are the first of their name in the monitor's scope."""
    kind, _, wanted = _first_seen_kind(monitor)
    seen = FirstSeen.objects.filter(project_id=monitor.project_id, kind=kind)
    for name in ("service", "model", "agent"):
        if getattr(monitor, name):
            seen = seen.filter(**{name: getattr(monitor, name)})
    if monitor.label:
        seen = seen.filter(run_id__in=_labelled(monitor))
    if wanted:
        seen = seen.filter(name=wanted)
    new = list(seen.filter(id__gt=monitor.seen_cursor).order_by("id"))
    if not new:
        return Verdict(False, cursor=monitor.seen_cursor)
    cursor = new[-1].id
    # A name seen before in the scope (under another model or agent, say) is not new to it.
    older = set(
        seen.filter(id__lte=monitor.seen_cursor, name__in={row.name for row in new}).values_list(
            "name", flat=True
        )
    )
    fresh, names = [], set(older)
    for row in new:
        if row.name not in names:
            names.add(row.name)
            fresh.append(row)
    if not fresh:
        return Verdict(False, cursor=cursor)
    first = min(fresh, key=lambda row: (row.call_at or row.seen_at, row.id))
    cause = {
        "type": kind,
        "name": first.name,
        "run": first.run_id,
        "seq": first.call_seq,
        "item": first.item_id or None,
        "item_kind": first.item_kind or None,
        "bytes": first.detail.get("bytes"),
        "at": (first.call_at or first.seen_at).isoformat(),
        "names": sorted(row.name for row in fresh),
    }
    return Verdict(True, cause=cause, cursor=cursor)


def since(monitor: Monitor, started: datetime):
    return scoped(monitor).filter(minute__gte=minute(started))


def first_seen_progress(monitor: Monitor, cause: dict, now: datetime) -> Verdict:
    """Still firing? Cleared once ``quiet_calls`` calls of the scope started after the last sighting of the
    episode's names without one (in rows that hold none: a run with the fix), or ``quiet_minutes`` passed
    since that sighting."""
    _, field_name, _ = _first_seen_kind(monitor)
    names = set(cause.get("names") or [cause.get("name")])
    started = datetime.fromisoformat(cause["at"]) if cause.get("at") else now
    rows = since(monitor, started)
    total = tally(rows, events=(field_name,))
    last_ns = max(
        (total[field_name][name]["last_at"] for name in names & set(total[field_name])), default=None
    )
    clean = 0
    if last_ns is not None:
        without = rows.filter(first_ns__gt=last_ns).exclude(**{f"{field_name}__has_any_keys": sorted(names)})
        clean = without.aggregate(calls=Sum("calls"))["calls"] or 0
    found = {**figures(total), "clean_calls": clean}
    if field_name == "breaks":
        hits = [total["breaks"][name] for name in names if name in total["breaks"]]
        found.update(
            occurrences=sum(entry["n"] for entry in hits),
            tokens=sum(entry["tokens"] for entry in hits),
            cost_usd=round(sum(entry["cost"] for entry in hits), 6),
        )
    else:
        found.update(occurrences=sum(total["findings"][n]["n"] for n in names if n in total["findings"]))
    last_seen = datetime.fromtimestamp(last_ns / 1e9, tz=now.tzinfo) if last_ns else started
    found["last_seen_at"] = last_seen.isoformat()
    quiet = clean >= param(monitor, "quiet_calls") or now - last_seen >= timedelta(
        minutes=param(monitor, "quiet_minutes")
    )
    return Verdict(not quiet, evidence=found)


# --- The threshold kinds ------------------------------------------------------------------------------


def cause_cost(monitor: Monitor, now: datetime) -> Verdict:
    total = tally(window(monitor, now, param(monitor, "window_minutes")))
    wanted = monitor.params.get("cause")
    names = {wanted} if wanted else None
    cost = sum(entry["cost"] for name, entry in total["breaks"].items() if names is None or name in names)
    return Verdict(
        cost > monitor.params["cost_usd_above"],
        top_break(total, names),
        {**figures(total), "cost_usd": round(cost, 6)},
    )


def hit_rate_drop(monitor: Monitor, now: datetime) -> Verdict:
    minutes = param(monitor, "window_minutes")
    total = tally(window(monitor, now, minutes))
    rate = hit_rate(total)
    baseline_rate = hit_rate(baseline(monitor, minute(now) - timedelta(minutes=minutes)))
    evidence = {
        **figures(total),
        "baseline_hit_rate": round(baseline_rate, 4) if baseline_rate is not None else None,
    }
    if rate is None or total["hit_calls"] < param(monitor, "min_calls"):
        return Verdict(False, evidence=evidence)
    below = monitor.params.get("below")
    drop = monitor.params.get("drop_points")
    firing = (below is not None and rate < below) or (
        drop is not None and baseline_rate is not None and (baseline_rate - rate) * 100 >= drop
    )
    return Verdict(firing, top_break(total), evidence)


def cost_spike(monitor: Monitor, now: datetime) -> Verdict:
    minutes = param(monitor, "window_minutes")
    rows = window(monitor, now, minutes)
    total = tally(rows)
    evidence = figures(total)
    firing = False
    above = monitor.params.get("above_usd")
    cause = top_break(total)
    if param(monitor, "per") == "run":
        costliest = rows.values("run_id").annotate(cost=Sum("cost_usd")).order_by("-cost", "run_id").first()
        if costliest is not None:
            evidence["run_cost_usd"] = round(costliest["cost"], 6)
            cause = {**cause, "costliest_run": costliest["run_id"]}
            firing = above is not None and costliest["cost"] > above
    elif above is not None:
        firing = total["cost_usd"] > above
    times = monitor.params.get("times_baseline")
    if times is not None:
        base = baseline(monitor, minute(now) - timedelta(minutes=minutes))
        per_window = base["cost_usd"] / (param(monitor, "baseline_days") * 1440 / minutes)
        evidence["baseline_cost_usd"] = round(per_window, 6)
        firing = firing or (per_window > 0 and total["cost_usd"] > times * per_window)
    limit = monitor.params.get("input_tokens_above")
    if limit is not None and (total["max_input"] or 0) > limit:
        evidence["max_input"] = total["max_input"]
        firing = True
    return Verdict(firing, cause, evidence)


def window_size(monitor: Monitor, now: datetime) -> Verdict:
    """The largest window of the scope's calls in the window: above ``above_tokens``, or above
    ``above_percent`` of its call's context limit (only calls that state their limit can set that off)."""
    rows = window(monitor, now, param(monitor, "window_minutes"))
    evidence, cause, firing = {}, {}, False
    peak = (
        rows.exclude(peak_window=None)
        .order_by("-peak_window", "minute")
        .values("run_id", "peak_window", "peak_seq")
        .first()
    )
    if peak is not None:
        evidence["peak_window"] = peak["peak_window"]
        cause = {"type": "window", "name": "window_size", "run": peak["run_id"], "seq": peak["peak_seq"]}
        above = monitor.params.get("above_tokens")
        firing = above is not None and peak["peak_window"] > above
    percent = monitor.params.get("above_percent")
    if percent is not None:
        share = (
            rows.exclude(peak_share=None)
            .order_by("-peak_share", "minute")
            .values("run_id", "peak_share", "share_seq")
            .first()
        )
        # None: no call of the window stated its limit (unknown, not 0 %).
        evidence["peak_percent_of_limit"] = round(share["peak_share"] * 100, 2) if share else None
        if share is not None and share["peak_share"] * 100 > percent and not firing:
            firing = True
            cause = {
                "type": "window",
                "name": "window_size",
                "run": share["run_id"],
                "seq": share["share_seq"],
            }
    return Verdict(firing, cause, evidence)


def first_seen_kind(monitor: Monitor) -> bool:
    """A cause or finding type first seen (not a cause's cost over a window)."""
    if monitor.kind == Kind.CACHE_BREAK_CAUSE:
        return monitor.params.get("cost_usd_above") is None
    return monitor.kind == Kind.FINDING_TYPE


def check(monitor: Monitor, now: datetime) -> Verdict:
    """Whether the monitor's condition holds now (the first-seen kinds: whether something new was seen)."""
    if first_seen_kind(monitor):
        return first_seen(monitor)
    return THRESHOLDS[monitor.kind](monitor, now)


def progress(monitor: Monitor, cause: dict, now: datetime) -> Verdict:
    """While an episode fires: whether it still does, and its figures so far."""
    if first_seen_kind(monitor):
        return first_seen_progress(monitor, cause, now)
    return THRESHOLDS[monitor.kind](monitor, now)


THRESHOLDS = {
    Kind.CACHE_BREAK_CAUSE: cause_cost,
    Kind.HIT_RATE_DROP: hit_rate_drop,
    Kind.COST_SPIKE: cost_spike,
    Kind.WINDOW_SIZE: window_size,
}
