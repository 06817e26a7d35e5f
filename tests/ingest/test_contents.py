"""Stored texts looked up by hash: what the batch task, the analyses and the pages read of them."""

import pytest

from ingest.models import Content, Project
from tests import services


@pytest.mark.django_db
def test_texts_by_hash_are_the_projects_stored_texts_among_the_hashes(project):
    other = Project.objects.create(slug="other", name="other")
    Content.objects.create(project=project, hash="a1", text="alpha text", tokens=3)
    Content.objects.create(project=project, hash="b2", text="beta", truncated=True)
    Content.objects.create(project=project, hash="with,comma", text="a sender's own hash")
    Content.objects.create(project=other, hash="c3", text="another project's")

    found = Content.objects.by_hash(project.id, ["b2", "a1", "a1", "missing", "c3", ""], "text", "tokens")
    assert sorted(found) == [("a1", "alpha text", 3), ("b2", "beta", None)]
    assert Content.objects.by_hash(project.id, {"a1", "b2"}) == [("a1",), ("b2",)]
    assert dict(Content.objects.by_hash(project.id, ["a1"], "text", chars=5)) == {"a1": "alpha"}
    assert sorted(Content.objects.by_hash(project.id, ["with,comma", "b2"], "truncated")) == [
        ("b2", True),
        ("with,comma", False),
    ]
    assert Content.objects.by_hash(project.id, []) == []
    with pytest.raises(KeyError):
        Content.objects.by_hash(project.id, ["a1"], "text; DROP TABLE ingest_content")


@pytest.mark.django_db
def test_texts_are_looked_up_hash_by_hash_whatever_the_statistics_say(project):
    """Statistics taken when the project had a few texts, then many more stored (a fast-growing table
    between two analyses): the lookup still probes the index per hash instead of reading the project's
    texts. A plain ``hash IN (...)`` read them all (the plan below, before the change)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        services.require("DATABASE_URL naming PostgreSQL (the plan is its own)")
    with connection.cursor() as cursor:
        insert = (
            "INSERT INTO ingest_content (project_id, hash, text, truncated, tokens)"
            " SELECT %s, md5(g::text), 'text', false, 1 FROM generate_series(%s, %s) g"
        )
        cursor.execute(insert, [project.id, 1, 200])
        cursor.execute("ANALYZE ingest_content")
        cursor.execute(insert, [project.id, 201, 30000])
        wanted = [f"{number:032x}" for number in range(2000)]
        plain = Content.objects.filter(project_id=project.id, hash__in=wanted).values("hash").explain()
        # What the plain form does here: read the project's texts (or the table) and filter the hashes.
        filtered = [line for line in plain.splitlines() if "Filter:" in line and "hash" in line]
        assert filtered, plain
        with CaptureQueriesContext(connection) as captured:
            assert Content.objects.by_hash(project.id, wanted, "tokens") == []
        cursor.execute(f"EXPLAIN {captured.captured_queries[-1]['sql']}")  # the lookup as it was sent
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "content_unique" in plan and "hash)::text = wanted.hash" in plan, plan
