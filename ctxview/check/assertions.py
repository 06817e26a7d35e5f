"""Assertions over checked runs, for tests (the pytest plugin's): the same rules as ``ctxview check``.
No Django here.
"""

from collections.abc import Iterable, Mapping

from ctxview.check import rules


class CheckedRun:
    """One run as the check's engine made it: ``run`` (the read API's run), ``calls``, ``findings`` and,
    from the engine, ``contents`` (each item's text by hash)."""

    def __init__(self, data: Mapping) -> None:
        self.data = data
        self.run = data["run"]
        self.calls: list[dict] = data["calls"]
        self.findings: list[dict] = data["findings"]
        self.contents: dict[str, str] = data.get("contents") or {}

    @property
    def key(self) -> str:
        return self.run["key"]

    def __repr__(self) -> str:
        return f"<CheckedRun {self.key!r}: {len(self.calls)} calls, {self.run.get('turns')} turns>"

    def breaks(self, cause: str = rules.ANY) -> list[dict]:
        """The calls that broke the cache (of ``cause``)."""
        return rules.breaks(self.data, cause)

    def hit_rate(self) -> float | None:
        return rules.hit_rate(self.data)

    def calls_at(self, turn: int | None = None, seq: int | None = None) -> list[dict]:
        """The calls of turn ``turn``, the call ``seq``, or (neither) the run's last call."""
        if seq is not None:
            return [call for call in self.calls if call["seq"] == seq]
        if turn is not None:
            return [call for call in self.calls if call["turn"] == turn]
        return self.calls[-1:]

    def holds(self, call: Mapping, item_or_text: str) -> dict | None:
        """The item of ``call`` that is ``item_or_text`` (its id or source) or whose text contains it."""
        for item in call["items"]:
            if item_or_text in (item["id"], item.get("source")):
                return item
        for item in call["items"]:
            if item_or_text in (self.contents.get(item.get("hash")) or ""):
                return item
        return None


def _checked(run) -> CheckedRun:
    if isinstance(run, CheckedRun):
        return run
    if isinstance(run, Mapping) and "calls" in run:
        return CheckedRun(run)
    raise TypeError(f"a run is expected (one of ctxview_runs()), not {type(run).__name__}")


def assert_no_cache_breaks(run, causes: Iterable[str] = (rules.ANY,)) -> None:
    """No call of ``run`` broke the cache (of any of ``causes``); the failure names each cause, call and
    item."""
    checked = _checked(run)
    failed = [
        outcome
        for outcome in (rules.cause_rule(checked.key, checked.data, cause) for cause in causes)
        if not outcome.passed
    ]
    if failed:
        lines = [f"run {checked.key}: {outcome.rule}: {outcome.message}" for outcome in failed]
        lines += [f"  {detail}" for outcome in failed for detail in outcome.details]
        raise AssertionError("\n".join(lines))


def assert_in_window(run, item_or_text: str, at_turn: int | None = None, at_call: int | None = None) -> None:
    """``item_or_text`` (an item id or source, or a text an item contains) is in the window of every call
    of turn ``at_turn`` (or of call ``at_call``; neither: the run's last call)."""
    checked = _checked(run)
    where = "the last call"
    if at_turn is not None or at_call is not None:
        where = f"call {at_call}" if at_call is not None else f"turn {at_turn}"
    calls = checked.calls_at(at_turn, at_call)
    if not calls:
        turns = sorted({call["turn"] for call in checked.calls if call["turn"] is not None})
        span = f"turns {turns[0]}..{turns[-1]}" if turns else "no turns"
        raise AssertionError(f"run {checked.key} has no call at {where} ({len(checked.calls)} calls, {span})")
    missing = [call for call in calls if checked.holds(call, item_or_text) is None]
    if not missing:
        return
    first = missing[0]
    raise AssertionError(
        f"run {checked.key}: {item_or_text!r} is not in the window at {where}: call {first['seq']} "
        f"(turn {first['turn']}, {len(first['items'])} items) lacks it"
        + (f", and {len(missing) - 1} more calls" if len(missing) > 1 else "")
        + _history(checked, item_or_text, first["seq"])
    )


def _history(checked: CheckedRun, item_or_text: str, before: int) -> str:
    """When the item was last in the window before call ``before``, and why it left (when it was excluded
    with a reason)."""
    held = [
        call["seq"] for call in checked.calls if call["seq"] < before and checked.holds(call, item_or_text)
    ]
    if not held:
        return "; in no window before it"
    left = next(
        call for call in checked.calls if call["seq"] > held[-1] and not checked.holds(call, item_or_text)
    )
    reasons = [entry.get("reason") for entry in left.get("excluded") or () if entry.get("id") == item_or_text]
    why = f" (excluded: {reasons[0]})" if reasons and reasons[0] else ""
    return f"; last in the window at call {held[-1]}, gone from call {left['seq']}{why}"
