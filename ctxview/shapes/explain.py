"""Explain this turn: what changed in the window since the turn before and since the start of the run.

The screen for "why did it get stupid at turn 40": which items are gone (and why, and since when),
what is new, which conflicts appeared, which pinned items went missing or slid into the middle, how
the buckets shifted, and what the cache did. Pure: plain dicts in, plain dicts out.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ctxcore import catalogue
from ctxcore.vocabulary import STANDING_KINDS, in_middle, position_shares
from ctxview.shapes import help, palette, words

# Kinds a person wants to see one by one when they leave the window; other items are counted by group.
LISTED = 300


def _reason_text(reason: str | None, manifest_source: str) -> str:
    if reason:
        return reason
    if manifest_source != "explicit":
        return "unknown (derived manifest: no exclusions are recorded)"
    return "none given (the builder neither included nor excluded it)"


def history(
    manifests: Iterable[tuple[int, int | None, Sequence[Mapping], Sequence[Mapping], str]],
) -> dict:
    """One pass over the calls up to the turn: where each item was last included and when it left."""
    last_included: dict[str, dict] = {}
    left: dict[str, dict] = {}
    previous_ids: set[str] = set()
    seen_calls = 0
    for seq, turn, items, excluded, source in manifests:
        seen_calls += 1
        ids = set()
        for item in items:
            ids.add(item["id"])
            last_included[item["id"]] = {
                "seq": seq,
                "turn": turn,
                "kind": item.get("kind") or "",
                "bucket": item.get("bucket") or "other",
                "tokens": item.get("tokens"),
                "pinned": bool(item.get("pinned")),
            }
        reasons = {entry["id"]: entry.get("reason") for entry in excluded}
        for item_id in previous_ids - ids:
            left[item_id] = {"seq": seq, "turn": turn, "reason": reasons.get(item_id), "source": source}
        for item_id in ids:
            left.pop(item_id, None)
        previous_ids = ids
    return {"last_included": last_included, "left": left, "calls": seen_calls}


def _middle_ids(items: Sequence[Mapping]) -> dict[str, float]:
    """Pinned items in the middle of the window, with their position share (by tokens when all known)."""
    shares = position_shares([item["tokens"] for item in items])
    return {
        item["id"]: round(centre, 3)
        for item, (_, centre) in zip(items, shares, strict=True)
        if item["pinned"] and in_middle(centre)
    }


def _conflict_key(conflict: Mapping) -> tuple:
    return (
        conflict["type"],
        conflict.get("source"),
        conflict.get("item_id"),
        tuple(conflict.get("versions") or ()),
    )


def _buckets(call: Mapping | None) -> dict[str, int]:
    if not call or not call.get("analysis"):
        return {}
    return {bucket: tokens or 0 for bucket, tokens in call["analysis"]["buckets"]["parts"].items()}


def explain(
    current: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    first: Mapping[str, Any],
    past: Mapping[str, Any],
    turn_calls: Sequence[Mapping[str, Any]],
    findings: Sequence[Mapping[str, Any]],
    item_base: str,
) -> dict:
    """What changed at ``current`` (the turn's last call) since ``previous`` (the turn before) and ``first``.

    ``past`` is ``history()`` over the calls up to and including ``current``; ``turn_calls`` are the
    turn's calls (``queries.series`` rows) and ``findings`` the findings of those calls. One function below
    per section of the page.
    """

    def link(item_id: str) -> str:
        return f"{item_base}{quote(item_id, safe='')}"

    flagged = {finding["item_id"] for finding in findings if finding.get("item_id")}
    important, other_groups = _gone_since_start(current, past, flagged, link)
    result = {
        "gone_previous": _gone_since_previous(current, previous, link),
        "gone_important": important,
        "gone_groups": other_groups,
        "gone_total": len(important) + sum(group["count"] for group in other_groups),
        "new_items": _new_items(current, previous, link),
        "conflicts": _conflicts(current, previous),
        "pinned_missing": _pinned_missing(current, previous, first, link),
        "pinned_middle": _pinned_middle(current, previous, link),
        "buckets": _bucket_rows(current, previous, first),
        "cache": _cache_rows(turn_calls),
        "findings": _finding_rows(findings),
        "window": _window(current, previous, first),
        "manifest_source": current["manifest_source"],
    }
    result["headlines"] = headlines(result, ("fact_dropped", "pinned_dropped"), findings)
    return result


def _excluded(call: Mapping[str, Any]) -> dict[str, str | None]:
    return {entry["id"]: entry.get("reason") for entry in call["excluded"]}


def _gone_since_previous(
    current: Mapping[str, Any], previous: Mapping[str, Any] | None, link: Callable[[str], str]
) -> list[dict]:
    """In the turn before's last call, not in this one."""
    if previous is None:
        return []
    now_ids = {item["id"] for item in current["items"]}
    excluded_now = _excluded(current)
    gone = []
    for item in previous["items"]:
        if item["id"] in now_ids:
            continue
        reason = excluded_now.get(item["id"])
        gone.append(
            {
                **_stub(item),
                "reason": _reason_text(reason, current["manifest_source"]),
                "reason_help": help.reason_help(reason),
                "url": link(item["id"]),
            }
        )
    return gone


def _gone_since_start(
    current: Mapping[str, Any], past: Mapping[str, Any], flagged: set[str], link: Callable[[str], str]
) -> tuple[list[dict], list[dict]]:
    """Included at some call before this one, not now: the important ones one by one (pinned, standing
    kinds, named by a finding), the others grouped by bucket and reason."""
    now_ids = {item["id"] for item in current["items"]}
    excluded_now = _excluded(current)
    source = current["manifest_source"]
    important, others = [], {}
    for item_id, last in past["last_included"].items():
        if item_id in now_ids:
            continue
        departure = past["left"].get(item_id, {})
        reason = departure.get("reason") or excluded_now.get(item_id)
        entry = {
            "id": item_id,
            "kind": last["kind"],
            "bucket": last["bucket"],
            "tokens": last["tokens"],
            "pinned": last["pinned"],
            "last_seq": last["seq"],
            "last_turn": last["turn"],
            "left_seq": departure.get("seq"),
            "left_turn": departure.get("turn"),
            "reason": _reason_text(reason, departure.get("source", source)),
            "reason_help": help.reason_help(reason),
            "url": link(item_id),
        }
        if last["pinned"] or last["kind"] in STANDING_KINDS or item_id in flagged:
            important.append(entry)
        else:
            group = others.setdefault(
                (last["bucket"], entry["reason"]),
                {"bucket": last["bucket"], "reason": entry["reason"], "count": 0, "tokens": 0, "items": []},
            )
            group["count"] += 1
            group["tokens"] += last["tokens"] or 0
            if len(group["items"]) < LISTED:
                group["items"].append(entry)
    important.sort(key=lambda entry: (not entry["pinned"], entry["left_seq"] or 0))
    return important, sorted(others.values(), key=lambda group: -group["tokens"])


def _new_items(
    current: Mapping[str, Any], previous: Mapping[str, Any] | None, link: Callable[[str], str]
) -> list[dict]:
    """New since the turn before."""
    previous_ids = {item["id"] for item in previous["items"]} if previous else set()
    return [
        _stub(item) | {"url": link(item["id"])} for item in current["items"] if item["id"] not in previous_ids
    ]


def _conflicts(current: Mapping[str, Any], previous: Mapping[str, Any] | None) -> list[dict]:
    """The current call's conflicts, marked new when the previous turn's last call did not have them."""
    conflicts_now = (current.get("analysis") or {}).get("conflicts") or []
    conflicts_before = {
        _conflict_key(conflict)
        for conflict in ((previous or {}).get("analysis") or {}).get("conflicts") or []
    }
    return [
        {
            **conflict,
            "new": _conflict_key(conflict) not in conflicts_before,
            "help": catalogue.finding_help(conflict["type"]),
        }
        for conflict in conflicts_now
    ]


def _pinned_missing(
    current: Mapping[str, Any],
    previous: Mapping[str, Any] | None,
    first: Mapping[str, Any],
    link: Callable[[str], str],
) -> list[dict]:
    """Pinned items of the first call or the turn before that are not in the window now."""
    now_ids = {item["id"] for item in current["items"]}
    excluded_now = _excluded(current)
    pinned_before = {
        item["id"]: item for call in (first, previous) if call for item in call["items"] if item["pinned"]
    }
    return [
        _stub(item)
        | {
            "url": link(item_id),
            "reason": _reason_text(excluded_now.get(item_id), current["manifest_source"]),
        }
        for item_id, item in pinned_before.items()
        if item_id not in now_ids
    ]


def _pinned_middle(
    current: Mapping[str, Any], previous: Mapping[str, Any] | None, link: Callable[[str], str]
) -> list[dict]:
    """Pinned items in the middle of the window now, and whether they moved there this turn."""
    middle_before = _middle_ids(previous["items"]) if previous else {}
    return [
        {"id": item_id, "share": share, "moved": item_id not in middle_before, "url": link(item_id)}
        for item_id, share in _middle_ids(current["items"]).items()
    ]


def _bucket_rows(
    current: Mapping[str, Any], previous: Mapping[str, Any] | None, first: Mapping[str, Any]
) -> list[dict]:
    """Tokens per bucket at the start, the turn before and now."""
    start, before, now = _buckets(first), _buckets(previous), _buckets(current)
    rows = []
    total_now = sum(now.values()) or 0
    for bucket in palette.BUCKET_ORDER:
        values = (start.get(bucket, 0), before.get(bucket, 0), now.get(bucket, 0))
        if not any(values):
            continue
        rows.append(
            {
                "bucket": bucket,
                "start": values[0],
                "previous": values[1] if previous else None,
                "now": values[2],
                "delta_previous": values[2] - values[1] if previous else None,
                "delta_start": values[2] - values[0],
                "share": values[2] / total_now if total_now else 0,
            }
        )
    return rows


def _cache_rows(turn_calls: Sequence[Mapping[str, Any]]) -> list[dict]:
    """What the cache did over the turn's calls."""
    rows = []
    for row in turn_calls:
        cache = row.get("cache") or {}
        prompt, read = row["prompt_total"], row["cache_read"]
        rows.append(
            {
                "seq": row["seq"],
                "url": row["url"],
                "prompt_total": prompt,
                "cache_read": read,
                "cache_write": row["cache_write"],
                "hit_rate": read / prompt if prompt and read is not None else None,
                "expected_read": cache.get("expected_read"),
                "broke": bool(cache.get("broke")),
                "cause": cache.get("cause"),
                "cause_help": catalogue.cause_help(cache.get("cause")),
                "invalidator": cache.get("invalidator_item_id"),
                "cost_usd": cache.get("cost_usd"),
            }
        )
    return rows


def _finding_rows(findings: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The turn's findings, most severe first, with their help."""
    return [
        {**finding, "help": catalogue.finding_help(finding["type"])}
        for finding in sorted(
            findings, key=lambda f: (catalogue.SEVERITY_ORDER.get(f["severity"], 3), f["call_seq"] or 0)
        )
    ]


def _window(current: Mapping[str, Any], previous: Mapping[str, Any] | None, first: Mapping[str, Any]) -> dict:
    """The window's size now, the turn before and at the start, and the model's limit."""
    return {
        "now": (current.get("analysis") or {}).get("buckets", {}).get("total"),
        "previous": ((previous or {}).get("analysis") or {}).get("buckets", {}).get("total"),
        "start": (first.get("analysis") or {}).get("buckets", {}).get("total"),
        "limit": (current.get("budget") or {}).get("limit"),
    }


def _stub(item: Mapping) -> dict:
    return {
        "id": item["id"],
        "kind": item.get("kind") or "",
        "bucket": item.get("bucket") or "other",
        "tokens": item.get("tokens"),
        "pinned": bool(item.get("pinned")),
    }


def _conflict_items(conflict: Mapping[str, Any]) -> list[str]:
    items = list(conflict.get("item_ids") or [])
    items += [conflict[key] for key in ("item_id", "superseded_by") if conflict.get(key)]
    return items


def conflict_subjects(conflicts: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Conflicts that concern the same items, as one subject: several findings (conflicting versions,
    superseded, stale) often say one thing about one source."""
    subjects: list[dict] = []
    for conflict in conflicts:
        items = _conflict_items(conflict)
        source = conflict.get("source")
        subject = next(
            (s for s in subjects if (source and source == s["source"]) or set(items) & set(s["items"])),
            None,
        )
        if subject is None:
            subject = {"source": source, "items": [], "types": []}
            subjects.append(subject)
        subject["source"] = subject["source"] or source
        subject["items"] += [item for item in items if item not in subject["items"]]
        if conflict["type"] not in subject["types"]:
            subject["types"].append(conflict["type"])
    for subject in subjects:
        subject["name"] = subject["source"] or (subject["items"] or subject["types"])[0]
    return subjects


def headlines(
    result: Mapping[str, Any], dropped_types: tuple[str, ...], findings: Sequence[Mapping]
) -> list[str]:
    """The few sentences that answer "what is different now", most important first (plain text)."""
    lines = []
    important = result["gone_important"]
    if important:
        named = ", ".join(
            f"{entry['id']} (left at turn {entry['left_turn']}: {entry['reason']})"
            if entry["left_turn"] is not None
            else f"{entry['id']} ({entry['reason']})"
            for entry in important[:5]
        )
        more = f" and {len(important) - 5} more" if len(important) > 5 else ""
        lines.append(
            f"{len(important)} fact, rule or pinned item{'s' if len(important) != 1 else ''} seen earlier in "
            f"the run {'are' if len(important) != 1 else 'is'} no longer in the window: {named}{more}."
        )
    if result["pinned_missing"]:
        missing = len(result["pinned_missing"])
        lines.append(
            f"{words.counted(missing, 'pinned item')} {'is' if missing == 1 else 'are'} missing from this "
            "window."
        )
    moved = [entry for entry in result["pinned_middle"] if entry["moved"]]
    if moved:
        lines.append(
            f"{words.counted(len(moved), 'pinned item')} moved into the middle of the window, where models "
            "read least: " + ", ".join(entry["id"] for entry in moved[:5]) + "."
        )
    subjects = conflict_subjects([conflict for conflict in result["conflicts"] if conflict["new"]])
    if subjects:
        lines.append(
            f"{len(subjects)} new conflict{'s' if len(subjects) != 1 else ''} in this window: "
            + "; ".join(
                f"{subject['name']} ({', '.join(subject['items'])}: {', '.join(subject['types'])})"
                for subject in subjects[:5]
            )
            + "."
        )
    window = result["window"]
    if window["now"] is not None and window["previous"] is not None:
        change = window["now"] - window["previous"]
        limit = (
            f" ({window['now'] / window['limit']:.0%} of the {window['limit']:,}-token limit)"
            if window["limit"]
            else ""
        )
        lines.append(
            f"The window {'grew' if change >= 0 else 'shrank'} by {abs(change):,} tokens since the turn "
            f"before, to {window['now']:,}{limit}; it started the run at {window['start'] or 0:,}."
        )
    breaks = [row for row in result["cache"] if row["broke"]]
    if breaks:
        lines.append(
            f"The prompt cache broke on {len(breaks):,} of this turn's "
            f"{words.counted(len(result['cache']), 'call')}: "
            + ", ".join(f"call {row['seq']} ({row['cause']})" for row in breaks)
            + "."
        )
    for finding in findings:
        if finding["type"] in dropped_types:
            lines.append(
                f"At call {finding['call_seq']} {finding['item_id']} was dropped ({finding['type']})."
            )
    if not lines:
        lines.append("Nothing notable changed in the window since the turn before.")
    return lines
