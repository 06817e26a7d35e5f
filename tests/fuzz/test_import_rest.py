"""Real run exports, broken one field at a time, imported through a live server (issue 40): the changes
made anywhere but in the calls' items (tests/fuzz/import_cases.py says what each case is and must answer;
tests/fuzz/test_import.py changes the items, on another core)."""

import pytest

from tests.fuzz.import_cases import OTHER_PLACES, check_broken_imports

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]


def test_a_broken_export_is_imported_whole_and_working_or_refused_by_path(live_server, alice, settings):
    check_broken_imports(live_server, alice, settings, OTHER_PLACES, deep=2_500)
