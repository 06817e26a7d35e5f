from datetime import UTC, datetime

import pytest

from ctxview.params import BadParameter
from ctxview.shapes import runs

CHOICES = (["svc-a"], ["m1"], ["fact_dropped"])


def parse(**query):
    return runs.parse(query, *CHOICES)


def test_defaults_sort_newest_first_on_page_one():
    assert parse() == {
        "service": "",
        "model": "",
        "finding": "",
        "label": "",
        "held": {},
        "since": None,
        "until": None,
        "sort": "-started",
        "page": 1,
    }


def test_dates_without_a_time_cover_whole_days_in_utc():
    filters = parse(
        since="2026-11-24", until="2026-11-25", service="svc-a", model="m1", finding="fact_dropped"
    )
    assert filters["since"] == datetime(2026, 11, 24, tzinfo=UTC)
    # until excludes its instant (as the API's): a date alone ends where the next day starts.
    assert filters["until"] == datetime(2026, 11, 26, tzinfo=UTC)
    assert parse(since="2026-11-24T09:30")["since"] == datetime(2026, 11, 24, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "query, message",
    [
        ({"service": "nope"}, "no run of this project comes from a service called 'nope'"),
        ({"model": "gpt-9"}, "no run of this project used a model called 'gpt-9'"),
        ({"finding": "bogus"}, "finding must be one of the finding types (fact_dropped)"),
        ({"since": "yesterday"}, "since must be a date (2026-11-30)"),
        ({"since": "2026-11-25", "until": "2026-11-24"}, "since must come before until"),
        ({"sort": "name"}, "sort must be one of started, calls"),
        ({"page": "0"}, "page must be between 1 and"),
        ({"page": "two"}, "page must be a whole number"),
        ({"label": "incident"}, "no run of this project is labelled 'incident'"),
        ({"hash": "a" * 501}, "hash is longer than 500 characters"),
    ],
)
def test_bad_filters_say_what_is_wrong(query, message):
    with pytest.raises(BadParameter, match=message.replace("(", r"\(").replace(")", r"\)")):
        runs.parse(query, *CHOICES)


def test_a_column_header_flips_its_own_sort_only():
    links = runs.sort_links("-calls")
    assert links["calls"] == "calls" and links["turns"] == "-turns"
    assert runs.sort_links("calls")["calls"] == "-calls"


def test_accounting_figures_tolerate_an_unanalysed_run():
    assert runs.figures(None) == {"hit_rate": None, "cost": None}
    assert runs.figures({"cache_hit_rate": 0.5, "cost_usd": {"with_cache": 1.25}}) == {
        "hit_rate": 0.5,
        "cost": 1.25,
    }


def test_what_the_window_held_maps_to_item_fields():
    filters = runs.parse(
        {"item": " tool:search ", "source": "src/api/billing.ts", "version": "v1", "hash": "", "label": "x"},
        *CHOICES,
        labels=["x"],
    )
    assert filters["held"] == {"id": "tool:search", "source": "src/api/billing.ts", "version": "v1"}
    assert filters["label"] == "x"


def test_the_costliest_cause_of_breaks_comes_from_the_accounting():
    def accounting(with_cache, by_cause):
        return {"cost_usd": {"with_cache": with_cache}, "cache_breaks": {"by_cause": by_cause}}

    by_cause = {
        "history_rewritten": {"count": 50, "tokens_rewritten": 97_674, "cost_usd": 0.337},
        "volatile_system_prompt": {"count": 29, "tokens_rewritten": 132_934, "cost_usd": 0.4586},
    }
    assert runs.costliest_breaks(accounting(1.46, by_cause)) == {
        "cause": "volatile_system_prompt",
        "count": 29,
        "tokens_rewritten": 132_934,
        "cost_usd": 0.4586,
    }
    # No price: the accounting's $0 per break is unknown, and the most tokens written again come first.
    unpriced = {name: {**entry, "cost_usd": 0.0} for name, entry in by_cause.items()}
    assert runs.costliest_breaks(accounting(None, unpriced))["cost_usd"] is None
    assert runs.costliest_breaks(accounting(None, unpriced))["cause"] == "volatile_system_prompt"
    assert runs.costliest_breaks(accounting(1.0, {})) is None and runs.costliest_breaks(None) is None
