from ctxview.analysis.findings import FIXES
from ctxview.panels import help


def test_every_finding_type_and_cause_has_an_explanation():
    types = {
        "cache_invalidated",
        "invisible_invalidator",
        "conflicting_versions",
        "superseded_included",
        "stale_version",
        "pinned_dropped",
        "fact_dropped",
        "lost_in_middle",
        "output_reserve_squeezed",
        "budget_exceeded",
        "unused_tools",
        "unknown_tool_called",
        "duplicate_content",
        "untrusted_in_instructions",
        "tool_results_dominant",
        "quadratic_history",
    }
    assert types <= set(help.FINDINGS)
    causes = set(FIXES) - types
    assert causes <= set(help.CAUSES)


def test_an_unknown_type_or_reason_gets_a_neutral_answer():
    assert "does not describe" in help.finding_help("new_kind")
    assert help.reason_help("my own words") == ""
    assert help.reason_help(None) == ""
    assert "sliding window" in help.reason_help("sliding_window")
    assert help.cause_help(None) == "" and help.cause_help("new_cause") == ""
    assert help.cause_help("key_order").startswith("the same JSON")


def test_plot_links_and_axes_are_compact_for_long_runs():
    from ctxview.panels import plot

    assert plot.axis([1, 2, 3, 4]) == {"x0": 1, "dx": 1}
    assert plot.axis([5, 10, 15]) == {"x0": 5, "dx": 5}
    assert plot.axis([1, 2, 4]) == {"x": [1, 2, 4]}
    assert plot.axis(["a", "b", "c"]) == {"x": ["a", "b", "c"]}
    urls = [f"/calls/{n}/" for n in (1998, 1999, 2000)]
    assert plot.links([1, 2, 3], urls) == {
        "x0": 1,
        "dx": 1,
        "prefix": "/calls/",
        "suffix": "/",
        "ids": ["1998", "1999", "2000"],
    }
    assert plot.links([7], ["/only/"])["ids"] == [""]
    assert plot.plot_text("<b>&") == "&lt;b&gt;&amp;"
