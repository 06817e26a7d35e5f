"""``manage.py titleruns``: runs stored before runs had titles get theirs."""

from io import StringIO

from django.core.management import call_command

from ingest.models import Run
from tests.factories import user_message
from tests.ingest.test_calls import send  # noqa: F401  (the fixture)
from tests.ingest.test_titles import call_request


def test_runs_stored_without_a_title_get_theirs_and_a_second_pass_changes_nothing(send):  # noqa: F811
    send(call_request(1, [user_message("Why is pay-shard-7 slow?")]))
    Run.objects.update(title="")  # as the migration leaves a run stored before it
    Run.objects.create(project=Run.objects.get().project, key="no calls yet", key_source="trace_id")
    out = StringIO()
    call_command("titleruns", stdout=out)
    assert out.getvalue().strip() == "1 of 1 untitled runs titled"
    assert Run.objects.get(key="conv-1").title == "Why is pay-shard-7 slow?"
    call_command("titleruns", stdout=out)
    assert out.getvalue().strip().endswith("0 of 0 untitled runs titled")
