"""Real run exports, broken one field at a time, imported through a live server (issue 40): the changes
made in the calls' items (tests/fuzz/import_cases.py says what each case is and must answer; the rest of
the document is changed by tests/fuzz/test_import_rest.py, on another core)."""

import copy

import pytest

from tests.fuzz.import_cases import BASE, ITEM_PLACES, check_broken_imports, names_a_place

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),
]


def test_a_broken_export_is_imported_whole_and_working_or_refused_by_path(live_server, alice, settings):
    check_broken_imports(live_server, alice, settings, ITEM_PLACES, deep=2_500)


def test_the_path_check_itself_tells_a_named_place_from_a_made_up_one():
    document = copy.deepcopy(BASE)
    assert names_a_place("cannot import: calls[0].items[1].hash: missing", document)
    assert names_a_place("cannot import: calls[1].usage.output: must be at least 0", document)
    assert names_a_place("the body: a key contains a NUL character", document)  # a key at the top
    assert names_a_place(f'cannot import: contents["{next(iter(document["contents"]))}"]: the hash', document)
    assert not names_a_place("cannot import: calls[7].items: must be a list", document)
    document["calls"][0]["usage_raw"][""] = ["a", "b"]
    assert names_a_place('cannot import: calls[0].usage_raw[""][1]: contains a NUL character', document)
    assert not names_a_place("cannot import: the document is malformed: KeyError('x')", document)
    assert not names_a_place("cannot import: TypeError('<' not supported)", document)
