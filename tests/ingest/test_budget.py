"""The per-process budget of request bytes in flight (ingest/budget.py): pure, no Django."""

import threading
import time

import pytest

from ingest.budget import Budget, OverBudget


def test_a_hold_is_given_back_on_exit_even_after_an_error():
    budget = Budget(lambda: 100)
    with pytest.raises(ValueError), budget.hold(40) as hold:
        hold.grow(20)
        assert budget.held == 60
        raise ValueError()
    assert budget.held == 0


def test_refuses_bytes_over_the_budget_while_others_hold_some():
    budget = Budget(lambda: 100)
    with budget.hold(70):
        with budget.hold(30) as second:
            with pytest.raises(OverBudget, match="budget of 100"):
                second.grow(1)
            assert (second.nbytes, budget.held) == (30, 100)
        with pytest.raises(OverBudget):
            budget.hold(31)
        assert budget.held == 70
    assert budget.held == 0


def test_a_request_alone_may_pass_the_budget():
    budget = Budget(lambda: 100)
    with budget.hold(500) as hold:
        hold.grow(500)
        assert budget.held == 1000
        with pytest.raises(OverBudget):
            budget.hold(1)
    assert budget.held == 0


def test_the_limit_is_read_at_every_request():
    limit = [100]
    budget = Budget(lambda: limit[0])
    with budget.hold(60):
        with pytest.raises(OverBudget):
            budget.hold(50)
        limit[0] = 200
        with budget.hold(50):
            assert budget.held == 110


def test_release_gives_back_once_and_a_released_hold_takes_nothing():
    budget = Budget(lambda: 100)
    hold = budget.hold(10)
    hold.release()
    hold.release()
    assert budget.held == 0
    with pytest.raises(RuntimeError):
        hold.grow(1)


def test_threads_never_hold_more_than_the_budget_together():
    limit = 3_000
    budget = Budget(lambda: limit)
    seen: list[int] = []
    refused = [0]
    start = threading.Barrier(8)

    def client(number: int) -> None:
        start.wait()
        for round_ in range(300):
            try:
                with budget.hold(100 + number) as hold:
                    for _ in range(5):
                        hold.grow(300 + round_ % 7)
                        seen.append(budget.held)
                        time.sleep(0)  # let the other threads in while this one holds bytes
            except OverBudget:
                refused[0] += 1

    threads = [threading.Thread(target=client, args=(number,)) for number in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert budget.held == 0
    # One hold alone is at most 100 + 7 + 5 x 306 bytes: the budget is what binds.
    assert seen and max(seen) <= limit
    assert refused[0] > 0
