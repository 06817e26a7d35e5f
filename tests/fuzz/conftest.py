"""Fuzzing support: example budgets, a hard time bound per example, and the count of cases that ran.

The default budgets keep tests/fuzz short on a 2-core machine. ``CTXVIEW_FUZZ_PROFILE=deep`` (``make
fuzz``) runs each test's ``deep`` budget instead: over 100,000 cases in all, most of them in the cheap
decoder tests. CTXVIEW_FUZZ_SCALE multiplies either, e.g. ``CTXVIEW_FUZZ_SCALE=20 .venv/bin/python -m
pytest tests/fuzz``.
"""

import contextlib
import os
import signal
from collections import Counter

from hypothesis import HealthCheck, Phase, settings

from tests import summary

SCALE = float(os.environ.get("CTXVIEW_FUZZ_SCALE", "1"))
PROFILE = os.environ.get("CTXVIEW_FUZZ_PROFILE", "default")
if PROFILE not in ("default", "deep"):
    raise ValueError(f"CTXVIEW_FUZZ_PROFILE={PROFILE!r}: use default or deep")
DEEP = PROFILE == "deep"
# Cases run per test (hypothesis examples, schemathesis calls), reported at the end of the session.
CASES: Counter = summary.FUZZ_CASES

# Hypothesis keeps what it found in .hypothesis/ (ignored by git) and replays it first next time.
SLOW_INPUT = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


def budget(examples: int, deadline_ms: int = 10_000, deep: int | None = None, **options) -> settings:
    """Settings for ``examples`` examples (``deep`` in the deep profile; times CTXVIEW_FUZZ_SCALE), each
    allowed ``deadline_ms``."""
    count = deep if DEEP and deep is not None else examples
    return settings(
        max_examples=max(1, int(count * SCALE)),
        deadline=deadline_ms,
        suppress_health_check=SLOW_INPUT + options.pop("suppress_health_check", []),
        # Shrinking megabyte-sized examples can take many minutes; a failure prints the example as found.
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
        **options,
    )


class Hang(Exception):
    """An example ran past its hard time bound."""


@contextlib.contextmanager
def bounded(seconds: float):
    """Fail an example that runs longer than ``seconds`` (hypothesis' deadline only reports afterwards)."""

    def expire(signum, frame):
        raise Hang(f"an example ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def summary_lines(cases: Counter) -> list[str]:
    lines = [f"{count:>7}  {name}" for name, count in sorted(cases.items())]
    lines.append(
        f"{sum(cases.values()):>7}  in all (CTXVIEW_FUZZ_PROFILE={PROFILE}, CTXVIEW_FUZZ_SCALE={SCALE:g})"
    )
    return lines


def pytest_runtest_logfinish(nodeid, location):
    # A deep run takes long: what ran so far is on disk, and its CPU time, should it be stopped.
    if CASES:
        cpu = sum(os.times()[:2])
        lines = [*summary_lines(CASES), f"after {nodeid}: {cpu:.0f} s CPU (this process)"]
        summary.write("fuzz.txt", "fuzz cases run\n" + "\n".join(lines))  # fuzz-gw0.txt in an xdist worker
