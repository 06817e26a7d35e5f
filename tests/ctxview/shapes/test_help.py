from ctxview.shapes import help


def test_an_unknown_reason_gets_a_neutral_answer():
    assert help.reason_help("my own words") == ""
    assert help.reason_help(None) == ""
    assert "sliding window" in help.reason_help("sliding_window")


def test_plot_links_and_axes_are_compact_for_long_runs():
    from ctxview.shapes import plot

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
