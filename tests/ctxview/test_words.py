"""Words and numbers on every page of the demo's runs (issue 36): no count with the wrong plural ("1
turns"), no "(s)" for a plural the page could have known."""

import html
import re

import pytest

from ctxview.shapes import words
from tests.ctxview.import_pages import pages_of
from tests.ctxview.ui_fixtures import inspect, viewer_client  # noqa: F401  (fixtures)

NOUNS = (
    "turn|call|break|item|message|token|agent|run|probe|finding|file|tool|result|request|policy|"
    "conflict|version|note|label|span|second|minute|hour|day|change|entry|cause|invocation|session"
)
ONE_PLURAL = re.compile(rf"(?<![\d.,]){1}\s+(?:{NOUNS})s\b".replace("{1}", "1"))
MAYBE_PLURAL = re.compile(r"\w\(s\)")
MONEY = re.compile(r"-?\$(\d[\d,]*)\.(\d+)")


def one_money_format(match: re.Match) -> bool:
    """Every page's money as ``words.money`` writes it: two decimals from a dollar up, four below."""
    dollars, decimals = int(match.group(1).replace(",", "")), match.group(2)
    return len(decimals) == (2 if dollars >= 1 or set(decimals) == {"0"} else 4)


def visible(text: str) -> str:
    """A page's text as read: tags, scripts and styles out, entities decoded."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S | re.I)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


@pytest.mark.django_db
def test_no_page_of_the_demo_says_1_turns_or_turn_s(inspect, viewer_client):  # noqa: F811
    wrong = []
    for run in inspect.runs.values():
        for page in pages_of(run):
            if page.startswith("/api/"):
                continue
            response = viewer_client.get(page)
            assert response.status_code in (200, 286), page  # 286: htmx, stop polling (an idle run)
            text = visible(response.text)
            wrong += [(page, match.group()) for match in ONE_PLURAL.finditer(text)]
            wrong += [(page, match.group()) for match in MONEY.finditer(text) if not one_money_format(match)]
            wrong += [
                (page, text[max(match.start() - 30, 0) : match.end()])
                for match in MAYBE_PLURAL.finditer(text)
            ]
    assert sorted({(re.sub(r"\d+", "N", page), said) for page, said in wrong}) == []


def test_a_count_takes_the_form_of_its_number():
    assert [words.counted(n, "break") for n in (0, 1, 2, 12014)] == [
        "0 breaks",
        "1 break",
        "2 breaks",
        "12,014 breaks",
    ]
    assert words.counted(2, "policy") == "2 policies"
    assert [words.money(value) for value in (1.4604, 0.04586, 0, None, -0.1)] == [
        "$1.46",
        "$0.0459",
        "$0.00",
        "unknown",
        "-$0.1000",
    ]
