"""Calibrating our prefix estimate on the cache reads the provider reports, per run. No Django here.

Our token counts are estimates (cl100k over the items' text); the provider counts with its own tokenizer
and adds what the trace never shows, such as Anthropic's tool-use preamble of a few hundred tokens before
the tools. A reported read is a fact about the call; our estimate is not. Each call that reports a read
where we estimated a reusable prefix is one observation ``(estimate, reported)``. The run's fit is
``reported ≈ ratio × estimate + overhead``: a least-squares line when the observations show a fixed
overhead, else a ratio through the origin. The sums are carried in the run's state (five integers,
whatever the run's length) and only calls *before* a call calibrate it, so results depend only on the
sequence of calls.
"""

from collections.abc import Mapping

# A tokenizer differs from ours by tens of percent, not by a factor of three: an observation beyond this
# is a cache that was partly lost (or a prefix we cannot see), not a calibration.
MAX_FACTOR = 3.0
# The fitted line's intercept counts as a fixed per-call overhead only above this many tokens, and only
# with a ratio in this range (two or three observations on a nearly straight line can fit anything).
MIN_OVERHEAD = 32
LINE_RATIOS = (0.5, 2.0)
# Estimate and report disagree when they differ by more than this share of the larger and this many tokens.
NOTE_SHARE = 0.25
NOTE_TOKENS = 256


def new_sums() -> dict:
    """The sums before a run's first observation."""
    return {"n": 0, "sx": 0, "sy": 0, "sxx": 0, "sxy": 0}


def observed(sums: Mapping, estimate: int, reported: int | None) -> dict:
    """The sums after one more call: only a read reported against a reusable prefix we estimated counts."""
    if estimate <= 0 or not reported or reported <= 0:
        return dict(sums)
    if not (1 / MAX_FACTOR <= reported / estimate <= MAX_FACTOR):
        return dict(sums)
    return {
        "n": sums["n"] + 1,
        "sx": sums["sx"] + estimate,
        "sy": sums["sy"] + reported,
        "sxx": sums["sxx"] + estimate * estimate,
        "sxy": sums["sxy"] + estimate * reported,
    }


def fit(sums: Mapping) -> dict | None:
    """``{ratio, overhead, calls}`` from the run's observations so far; None before the first one."""
    n, sx, sy, sxx, sxy = (sums[key] for key in ("n", "sx", "sy", "sxx", "sxy"))
    if n == 0 or sxx == 0:
        return None
    spread = n * sxx - sx * sx  # n² × variance of the estimates: 0 when every estimate was the same
    if n >= 2 and spread > 0:
        ratio = (n * sxy - sx * sy) / spread
        overhead = (sy - ratio * sx) / n
        if overhead >= MIN_OVERHEAD and LINE_RATIOS[0] <= ratio <= LINE_RATIOS[1]:
            return {"ratio": round(ratio, 4), "overhead": round(overhead), "calls": n}
    return {"ratio": round(sxy / sxx, 4), "overhead": 0, "calls": n}


def calibrated(estimate: int, calibration: Mapping | None) -> int:
    """Our estimate of a cached prefix in the provider's tokens (unchanged before any observation)."""
    if estimate <= 0 or calibration is None:
        return max(estimate, 0)
    return max(0, round(estimate * calibration["ratio"] + calibration["overhead"]))


def disagree(expected: int, reported: int) -> bool:
    """Whether our expectation and the provider's report differ by more than an estimate's error."""
    difference = abs(expected - reported)
    return difference > NOTE_TOKENS and difference > NOTE_SHARE * max(expected, reported)
