"""The rules of ``ctxview check``, evaluated over runs as the read API serialises them (a run, its calls
and its findings), whether the engine made them here or a server did. No Django here.

A rule holds or fails for one run; a failure says where: the cause, the call and the item.
"""

import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path

from ctxcore.catalogue import CAUSES, FINDING_TYPES

ANY = "any"
PINNED_DROPPED = "pinned_dropped"
BASELINE_VERSION = 1
# Lines of detail a failure shows; the rest is counted.
MAX_DETAILS = 10


class BadRules(Exception):
    """Rules that cannot be used (an unknown cause, a bad number, a config file with a mistake)."""


@dataclass(frozen=True)
class Rules:
    fail_on_cause: tuple[str, ...] = ()  # cause names, or "any" (every break)
    fail_on_finding: tuple[str, ...] = ()  # finding types, or "any"
    min_hit_rate: float | None = None  # 0..1
    max_window: int | None = None  # tokens
    require_pinned: bool = False
    baseline: Mapping | None = None  # a baseline document (``baseline_of``)

    def __bool__(self) -> bool:
        return any(getattr(self, spec.name) not in (None, (), False) for spec in fields(self))


@dataclass(frozen=True)
class Outcome:
    """One rule for one run."""

    run: str
    rule: str
    passed: bool
    message: str = ""  # one line: why it failed
    details: tuple[str, ...] = field(default_factory=tuple)  # the calls and items, one a line


# --- Rules from flags and a TOML file ---------------------------------------------------------------

CONFIG_KEYS = (
    "fail_on_cause",
    "fail_on_finding",
    "min_hit_rate",
    "max_window",
    "require_pinned",
    "baseline",
    "write_baseline",
    "junit",
    "markdown",
)


def read_config(path: str) -> dict:
    """The settings of a TOML file: its ``[tool.ctxview.check]`` table (a pyproject.toml), its
    ``[check]`` table, or its top level; keys as the flags are named (``fail-on-cause`` or
    ``fail_on_cause``)."""
    try:
        with open(path, "rb") as stream:
            document = tomllib.load(stream)
    except OSError as exc:
        raise BadRules(f"{path}: cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadRules(f"{path}: not valid TOML ({exc})") from None
    table = document.get("tool", {}).get("ctxview", {}).get("check")
    if table is None:
        table = document.get("check", document)
    if not isinstance(table, dict):
        raise BadRules(f"{path}: [check] must be a table")
    config = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in CONFIG_KEYS:
            raise BadRules(f"{path}: unknown setting {key!r} (known: {', '.join(CONFIG_KEYS)})")
        if name in ("fail_on_cause", "fail_on_finding") and isinstance(value, str):
            value = [value]
        config[name] = value
    return config


def rules_from(config: Mapping, source: str = "the flags") -> Rules:
    """Rules from flags and config values, each checked; ``source`` names where they came from."""
    causes = tuple(_names(config.get("fail_on_cause") or (), CAUSES, "cause", source))
    types = tuple(_names(config.get("fail_on_finding") or (), FINDING_TYPES, "finding type", source))
    hit_rate = config.get("min_hit_rate")
    if hit_rate is not None:
        hit_rate = _rate(hit_rate, source)
    window = config.get("max_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        raise BadRules(f"{source}: max-window must be a whole number of tokens, not {window!r}")
    pinned = config.get("require_pinned", False)
    if not isinstance(pinned, bool):
        raise BadRules(f"{source}: require-pinned must be true or false, not {pinned!r}")
    baseline = read_baseline(config["baseline"]) if config.get("baseline") else None
    return Rules(causes, types, hit_rate, window, pinned, baseline)


def _names(values, known: Mapping, what: str, source: str) -> list[str]:
    if isinstance(values, str) or not all(isinstance(value, str) for value in values):
        raise BadRules(f"{source}: a list of {what}s is expected, not {values!r}")
    for value in values:
        if value != ANY and value not in known:
            raise BadRules(f"{source}: unknown {what} {value!r}; known: {ANY}, {', '.join(known)}")
    return list(dict.fromkeys(values))  # once each, in order


def _rate(value, source: str) -> float:
    """A rate from 0..1, or a percentage written ``"60%"``."""
    text = str(value).strip()
    try:
        rate = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        rate = math.nan
    if isinstance(value, bool) or not 0 <= rate <= 1:
        raise BadRules(f"{source}: min-hit-rate must be between 0 and 1 (or a percentage), not {value!r}")
    return rate


# --- Baseline ---------------------------------------------------------------------------------------


def baseline_of(runs: Iterable[Mapping]) -> dict:
    """The causes of the cache breaks in ``runs``: for each, its first break and how many calls and runs."""
    causes: dict[str, dict] = {}
    for run in runs:
        found = breaks(run)
        for call in found:
            first = {"calls": 0, "runs": 0, "first": _where(run, call)}
            causes.setdefault(call["cache"]["cause"], first)["calls"] += 1
        for cause in {call["cache"]["cause"] for call in found}:
            causes[cause]["runs"] += 1
    return {"ctxview_check_baseline": BASELINE_VERSION, "causes": dict(sorted(causes.items()))}


def write_baseline(path: str, runs: Iterable[Mapping]) -> None:
    Path(path).write_text(json.dumps(baseline_of(runs), indent=2) + "\n")


def read_baseline(path: str) -> dict:
    try:
        document = json.loads(Path(path).read_text())
    except OSError as exc:
        raise BadRules(f"{path}: the baseline cannot be read ({exc.strerror})") from None
    except ValueError as exc:
        raise BadRules(f"{path}: the baseline is not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("ctxview_check_baseline") != BASELINE_VERSION:
        raise BadRules(f"{path}: not a baseline written by ctxview check --write-baseline")
    if not isinstance(document.get("causes"), dict):
        raise BadRules(f"{path}: the baseline has no causes table")
    return document


def _where(run: Mapping, call: Mapping) -> dict:
    return {"run": run["run"]["key"], "seq": call["seq"], "item": call["cache"]["invalidator_item_id"]}


# --- The rules --------------------------------------------------------------------------------------


def evaluate(runs: list[Mapping], rules: Rules) -> list[Outcome]:
    """Every rule for every run, in the order the rules are listed above."""
    outcomes = []
    for run in runs:
        key = run["run"]["key"]
        outcomes += [cause_rule(key, run, cause) for cause in rules.fail_on_cause]
        outcomes += [finding_rule(key, run, kind) for kind in rules.fail_on_finding]
        if rules.min_hit_rate is not None:
            outcomes.append(hit_rate_rule(key, run, rules.min_hit_rate))
        if rules.max_window is not None:
            outcomes.append(window_rule(key, run, rules.max_window))
        if rules.require_pinned:
            outcomes.append(pinned_rule(key, run))
        if rules.baseline is not None:
            outcomes.append(baseline_rule(key, run, rules.baseline))
    return outcomes


def breaks(run: Mapping, cause: str = ANY) -> list[Mapping]:
    """The run's calls that broke the cache (``cause``: only those of that cause, including a cause that
    is no break, such as ``below_minimum``)."""
    found = []
    for call in run["calls"]:
        cache = call.get("cache") or {}
        if cache.get("broke") if cause == ANY else cache.get("cause") == cause:
            found.append(call)
    return found


def cause_rule(key: str, run: Mapping, cause: str) -> Outcome:
    name = f"no cache break ({'any cause' if cause == ANY else cause})"
    found = breaks(run, cause)
    if not found:
        return Outcome(key, name, True)
    first = found[0]["cache"]
    message = (
        f"{_count(len(found), 'call')} broke the cache: first call {found[0]['seq']}, "
        f"cause {first['cause']}, item {first['invalidator_item_id'] or '(none)'}"
    )
    return Outcome(key, name, False, message, _limited(_break_lines(found, by_item=cause != ANY)))


def _break_lines(calls: list[Mapping], by_item: bool = True) -> list[str]:
    """One line per cause (and item, ``by_item``): its first call, how many calls, what it cost, and the
    bytes that differ."""
    groups: dict[tuple, list[Mapping]] = {}
    for call in calls:
        cache = call["cache"]
        key = (cache["cause"], cache["invalidator_item_id"]) if by_item else (cache["cause"],)
        groups.setdefault(key, []).append(call)
    lines = []
    for (cause, *_), group in groups.items():
        cache = group[0]["cache"]
        tokens = sum(call["cache"].get("tokens_rewritten") or 0 for call in group)
        cost = sum(call["cache"].get("cost_usd") or 0 for call in group)
        more = f" (and {_count(len(group) - 1, 'more call')})" if len(group) > 1 else ""
        items = {call["cache"]["invalidator_item_id"] for call in group} - {cache["invalidator_item_id"]}
        item = cache["invalidator_item_id"] or "(none)"
        if items:
            item += f" (then {_count(len(items), 'other item')})"
        line = f"call {group[0]['seq']}{more}: cause {cause}, item {item}, {tokens:,} tokens written again"
        if cost:
            line += f", ${cost:.4f}"
        differs = _differs(cache.get("detail") or {})
        lines.append(line + (f"; {differs}" if differs else ""))
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _differs(detail: Mapping) -> str:
    """The bytes that differ, as the cache analysis found them (cut short)."""
    changed = detail.get("bytes")
    if not isinstance(changed, Mapping):
        return ""
    old, new = _cut(changed.get("old") or ""), _cut(changed.get("new") or "")
    return f"at byte {changed.get('offset')}: {old!r} became {new!r}"


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def finding_rule(key: str, run: Mapping, kind: str) -> Outcome:
    name = f"no finding ({'any type' if kind == ANY else kind})"
    found = [finding for finding in run["findings"] if kind == ANY or finding["type"] == kind]
    if not found:
        return Outcome(key, name, True)
    first = found[0]
    message = f"{_count(len(found), 'finding')}: first {first['type']} at {_at(first)}"
    return Outcome(key, name, False, message, _limited(_finding_line(finding) for finding in found))


def _at(finding: Mapping) -> str:
    where = f"call {finding['call_seq']}" if finding["call_seq"] is not None else "the run"
    return where + (f", item {finding['item_id']}" if finding.get("item_id") else "")


def _finding_line(finding: Mapping) -> str:
    cause = f" (cause {finding['cause']})" if finding.get("cause") else ""
    return f"{_at(finding)}: {finding['type']}{cause}, {finding['severity']}"


def hit_rate_rule(key: str, run: Mapping, minimum: float) -> Outcome:
    name = f"cache hit rate at least {minimum:.0%}"
    rate = hit_rate(run)
    if rate is None:
        return Outcome(key, name, False, "the hit rate is unknown: no call reported its cache reads")
    if rate >= minimum:
        return Outcome(key, name, True, f"{rate:.1%}")
    worst = _first_breaks(run)
    return Outcome(key, name, False, f"the hit rate is {rate:.1%}, below {minimum:.0%}", worst)


def hit_rate(run: Mapping) -> float | None:
    """The run's cache hit rate as the server's accounting has it (cache read ÷ prompt, over the calls
    that reported both)."""
    return (run["run"].get("accounting") or {}).get("cache_hit_rate")


def _first_breaks(run: Mapping) -> tuple[str, ...]:
    """What cost the hit rate: the run's breaks by cause and item."""
    return _limited(_break_lines(breaks(run), by_item=False))


def window(call: Mapping) -> int | None:
    """A call's window in tokens: the prompt the provider reported, else the analysis's count."""
    reported = (call.get("usage") or {}).get("prompt_total")
    if reported is not None:
        return reported
    return (call.get("buckets") or {}).get("total")


def window_rule(key: str, run: Mapping, maximum: int) -> Outcome:
    name = f"window at most {maximum:,} tokens"
    over = [(call, window(call)) for call in run["calls"] if (window(call) or 0) > maximum]
    if not over:
        return Outcome(key, name, True)
    peak_call, peak = max(over, key=lambda pair: pair[1])
    message = (
        f"{_count(len(over), 'call')} over {maximum:,} tokens: first call {over[0][0]['seq']}, "
        f"peak {peak:,} at call {peak_call['seq']}"
    )
    lines = [f"call {call['seq']} (turn {call['turn']}): {size:,} tokens" for call, size in over]
    return Outcome(key, name, False, message, _limited(lines))


def pinned_rule(key: str, run: Mapping) -> Outcome:
    """Pinned items present at every call: no ``pinned_dropped`` finding (the analysis decides what a
    drop is: per agent's chain of calls, a superseded item replaced, not dropped)."""
    name = "pinned items in every call"
    dropped = [finding for finding in run["findings"] if finding["type"] == PINNED_DROPPED]
    if not dropped:
        return Outcome(key, name, True)
    lines = []
    for finding in dropped:
        reason = (finding.get("evidence") or {}).get("reason")
        lines.append(
            f"call {finding['call_seq']}: item {finding['item_id']} dropped ({reason or 'no reason given'})"
        )
    first = dropped[0]
    message = (
        f"{_count(len(dropped), 'pinned item')} dropped: first item {first['item_id']} "
        f"at call {first['call_seq']}"
    )
    return Outcome(key, name, False, message, _limited(lines))


def baseline_rule(key: str, run: Mapping, baseline: Mapping) -> Outcome:
    name = "no cause beyond the baseline"
    known = set(baseline["causes"])
    new = [call for call in breaks(run) if call["cache"]["cause"] not in known]
    if not new:
        return Outcome(key, name, True)
    causes = sorted({call["cache"]["cause"] for call in new})
    message = f"new causes: {', '.join(causes)} (first at call {new[0]['seq']})"
    return Outcome(key, name, False, message, _limited(_break_lines(new, by_item=False)))


def _limited(lines: Iterable[str]) -> tuple[str, ...]:
    lines = list(lines)
    if len(lines) > MAX_DETAILS:
        return (*lines[:MAX_DETAILS], f"… and {len(lines) - MAX_DETAILS} more")
    return tuple(lines)
