"""``field__any_of``: ``__in`` for long lists of ids, sent as one parameter on PostgreSQL."""

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from ingest.models import Run


@pytest.mark.parametrize(
    "values",
    [["a", "c"], [], [""], ["a,b"], ["a", "a,b", ""], [f"k{n}" for n in range(600)]],
    ids=["plain", "none", "empty", "comma", "mixed", "many"],
)
def test_any_of_finds_what_in_finds(project, values):
    for key in ["a", "b", "c", "", "a,b", "k7", "k599", "k600"]:
        Run.objects.create(project=project, key=key)
    expected = sorted(Run.objects.filter(key__in=values).values_list("key", flat=True))
    assert sorted(Run.objects.filter(key__any_of=values).values_list("key", flat=True)) == expected
    # Inside an OR, next to another condition, as the duplicate check uses it.
    either = Q(key__any_of=values) | Q(key="b")
    assert sorted(Run.objects.filter(either).values_list("key", flat=True)) == sorted({*expected, "b"})


def test_any_of_sends_many_ids_as_one_parameter_on_postgresql(project):
    with CaptureQueriesContext(connection) as queries:
        list(Run.objects.filter(key__any_of={f"{n:016x}" for n in range(512)}))
    sql = queries[0]["sql"]
    if connection.vendor == "postgresql":
        assert "string_to_array" in sql and sql.count("'") <= 6  # one literal, not 512
    else:  # SQLite: it is __in
        assert " IN (" in sql
