from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from ingest.keys import project_for_key
from ingest.models import Membership, Project


def run(*args) -> list[str]:
    out = StringIO()
    call_command("createproject", *args, stdout=out)
    return out.getvalue().splitlines()


def test_creates_the_project_and_prints_a_working_key_last(alice):
    lines = run("shop", "--owner", "alice")
    project = Project.objects.get(slug="shop")
    assert project_for_key(lines[-1]) == project
    assert Membership.objects.get(project=project, user=alice).role == "admin"


def test_is_idempotent_and_prints_a_new_key_each_time(db):
    first = run("shop")[-1]
    second = run("shop")[-1]
    assert Project.objects.filter(slug="shop").count() == 1
    assert first != second
    assert project_for_key(first) == project_for_key(second) == Project.objects.get(slug="shop")


def test_refuses_an_unknown_owner(db):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        run("shop", "--owner", "nobody")
    assert not Project.objects.exists()


def test_refuses_a_bad_slug(db):
    with pytest.raises(CommandError, match="not a valid slug"):
        run("no spaces please")
