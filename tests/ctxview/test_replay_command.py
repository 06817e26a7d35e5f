"""python manage.py replay: the Replay page's table, printed."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.ctxview import ui_fixtures

inspect = ui_fixtures.inspect


def _replay(*args, **options) -> str:
    out = StringIO()
    call_command("replay", *args, stdout=out, **options)
    return out.getvalue()


def _rows(output: str) -> dict[str, list[str]]:
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return {
        cells[0]: dict(zip(header, cells, strict=True))
        for cells in ([cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:])
    }


def test_prints_the_policies_table_with_probes(inspect, db):
    output = _replay(str(inspect.incident.id), policy=["recorded,full", "sliding_window:12,user_verbatim:4"])
    rows = _rows(output)
    assert list(rows) == ["recorded", "full", "sliding_window:12", "user_verbatim:4"]
    assert rows["recorded"]["vs recorded"] == "100%"
    assert rows["full"]["fact:affected-shard"] == "verbatim"
    assert rows["sliding_window:12"]["fact:affected-shard"].startswith("absent (left at call ")
    assert rows["user_verbatim:4"]["rule:ticket-owner"] == "verbatim"
    assert "cheapest policy keeping every probe: user_verbatim:4" in output
    assert "probes at turn 40 (call 57)" in output


def test_names_a_run_by_its_key_within_a_project_and_reads_probes_at_a_turn(inspect, db):
    output = _replay("demo-incident-turn-40", project=inspect.project.slug, policy=["recorded"], at_turn=20)
    assert _rows(output)["recorded"]["fact:affected-shard"] == "verbatim"
    assert "probes at turn 20" in output


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (("999999",), {}, "no run '999999'"),
        (("some-key",), {}, "give --project SLUG"),
        (("{id}",), {"policy": ["window:3"]}, "unknown policy 'window'"),
        (("{id}",), {"at_turn": 41}, "--at-turn must be between 1 and 40"),
    ],
)
def test_bad_arguments_say_what_is_wrong(inspect, db, args, options, message):
    args = tuple(arg.format(id=inspect.incident.id) for arg in args)
    with pytest.raises(CommandError, match=message):
        _replay(*args, **options)


@pytest.mark.django_db(transaction=True)  # the receiver processes a batch once its transaction commits
def test_the_demo_command_adds_the_incidents_text_probes_once():
    from ctxview.management.commands.demo import DEMO_PROJECT, Command
    from ctxview.models import Probe
    from tests import factories
    from tests.ctxview import ui_data

    _, key = factories.project_with_key(DEMO_PROJECT)
    ui_data.post(ui_data.demo_requests(), key)
    for _ in range(2):
        Command()._add_probes(wait_s=5)
    values = Probe.objects.filter(run__key="demo-incident-turn-40").values_list("kind", "value")
    assert sorted(values) == [("text", "employee 4417"), ("text", "pay-shard-7")]
