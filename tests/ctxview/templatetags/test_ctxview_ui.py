import pytest

from ctxview.templatetags.ctxview_ui import breakable, http_link, size, usd


@pytest.mark.parametrize(
    "url", ["https://t.example/INC-7", "http://wiki.example/pm?id=1&x=<y>", "HTTPS://T.EXAMPLE/A"]
)
def test_an_http_link_is_kept(url):
    assert http_link(url) == url


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        " javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "https:evil",
        "https:///path-only",
        "//t.example/x",
        "/runs/1/",
        "https://t.example/\njavascript:alert(1)",
        "http://[::1",
        "",
        None,
    ],
)
def test_anything_else_is_no_link(url):
    assert http_link(url) == ""


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.4604, "$1.46"), (0.045863, "$0.0459"), (-0.103835, "-$0.1038"), (1234.5, "$1,234.50"), (0, "$0.00")],
)
def test_dollars_are_written_one_way(value, text):
    assert usd(value) == text


def test_an_unknown_amount_is_said():
    assert usd(None) == "unknown"


@pytest.mark.parametrize(
    ("value", "text"), [(512, "512 B"), (159_275, "155.5 kB"), (3_500_000, "3.3 MB"), (None, "unknown")]
)
def test_byte_counts_carry_their_unit(value, text):
    assert size(value) == text


def test_a_breakable_id_wraps_only_after_its_separators_and_stays_escaped():
    assert breakable("file:src/a.ts") == "file:<wbr>src/<wbr>a.<wbr>ts"
    assert breakable("<b>x</b>") == "&lt;b&gt;x&lt;/<wbr>b&gt;"
    assert breakable(None) == ""
