"""A per-process budget of request bytes in memory (bodies read and decompressed). No Django here.

The decompressed-size limit holds per request; without a budget, eight concurrent gzip bombs of 61 KB
each (60 MB inside) took 1.75 GB in one web process. A request holds the bytes it has read or inflated
and gives them back when it is answered; one that would go over the budget is refused with a retryable
answer (503 + Retry-After) instead. The OTLP/HTTP receiver grows its hold as it reads and inflates; a
gRPC receiver, which gets the decoded size up front, can take ``with budget.hold(size):``.
"""

import threading
from collections.abc import Callable


class OverBudget(Exception):
    """Taking these bytes would put the process over its budget; retry later."""


class Budget:
    """Bytes held by requests in flight, at most ``limit()`` in all.

    A request alone in flight may go over the limit: the per-request limits bound it, and a budget
    smaller than one large request must not refuse that request forever."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._held = 0

    @property
    def held(self) -> int:
        return self._held

    def hold(self, nbytes: int = 0) -> "Hold":
        """A context manager holding ``nbytes`` (more with ``grow``) until it exits."""
        hold = Hold(self)
        hold.grow(nbytes)
        return hold

    def _take(self, hold: "Hold", nbytes: int) -> None:
        with self._lock:
            limit = self._limit()
            others = self._held - hold.nbytes
            if others and self._held + nbytes > limit:
                raise OverBudget(
                    f"this process holds {self._held} bytes of requests in flight and {nbytes} more "
                    f"would pass its budget of {limit}"
                )
            self._held += nbytes
            hold.nbytes += nbytes

    def _give_back(self, nbytes: int) -> None:
        with self._lock:
            self._held -= nbytes


class Hold:
    """Bytes one request holds; released on exit from ``with`` (or by ``release``), exactly once."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self.nbytes = 0
        self._released = False

    def grow(self, nbytes: int) -> None:
        """Hold ``nbytes`` more; OverBudget when the process has no room for them."""
        if self._released:
            raise RuntimeError("this hold was released")
        if nbytes > 0:
            self._budget._take(self, nbytes)

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._budget._give_back(self.nbytes)

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()
