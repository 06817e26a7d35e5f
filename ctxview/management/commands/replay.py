"""Replay a stored run under context policies and print the table the Replay page shows.

python manage.py replay RUN_ID [--policy recorded,full,sliding_window:12] [--policy pin_end] [--at-turn 40]
python manage.py replay demo-incident-turn-40 --project demo --policy user_verbatim:4
"""

import time

from django.core.management.base import BaseCommand, CommandError

from ctxcore.replay import DEFAULT_POLICIES, BadPolicy, parse_list
from ctxview.replay import last_turn, replay_run, run_calls
from ctxview.writes import form_int
from ingest.models import Run

HEADER = (
    "policy",
    "billed input",
    "vs recorded",
    "cost (USD)",
    "cache hit rate",
    "cache breaks",
    "peak window",
)


class Command(BaseCommand):
    help = "Replay a run under context policies: billed input, cost, cache and probes per policy."

    def add_arguments(self, parser):
        parser.add_argument("run", help="the run's id, or its key with --project")
        parser.add_argument("--project", help="the project's slug, when RUN is a run key")
        parser.add_argument(
            "--policy", action="append", help="policy specs, comma-separated or repeated (default: a set)"
        )
        parser.add_argument("--at-turn", type=int, help="the turn probes are read at (default: the last)")

    def handle(self, *args, run: str, project: str | None, policy: list[str] | None, at_turn, **options):
        found = self._run(run, project)
        try:
            policies = parse_list(",".join(policy or DEFAULT_POLICIES))
        except BadPolicy as exc:
            raise CommandError(str(exc)) from None
        calls = run_calls(found)
        if not calls:
            raise CommandError(f"run {found.key} has no numbered calls to replay yet")
        last = last_turn(calls)
        if at_turn is not None and not 1 <= at_turn <= last:
            raise CommandError(f"--at-turn must be between 1 and {last}")
        started = time.perf_counter()
        result = replay_run(found, policies, at_turn, calls, limited=False)
        elapsed = time.perf_counter() - started
        self.stdout.write(self._table(result))
        self.stdout.write(
            f"\nrun {found.key}: {len(calls)} calls, probes at turn {result['at_turn']} (call "
            f"{result['query_seq']}); content: {result['content']}; cheapest policy keeping every probe: "
            f"{result['cheapest_keeping_all'] or 'none'}; replayed in {elapsed:.2f} s"
        )

    def _run(self, run: str, project: str | None) -> Run:
        if project:
            found = Run.objects.filter(project__slug=project, key=run).select_related("project").first()
        elif isinstance(run_id := form_int(run), int):
            found = Run.objects.filter(id=run_id).select_related("project").first()
        else:
            raise CommandError("RUN is a run id; give --project SLUG to name a run by its key")
        if found is None:
            raise CommandError(f"no run {run!r}" + (f" in project {project!r}" if project else ""))
        return found

    def _table(self, result: dict) -> str:
        rows = result["policies"]
        probes = [probe["probe"] for probe in rows[0]["probes"]] if rows else []
        reference = next((row for row in rows if row["policy"] == "recorded"), rows[0] if rows else None)
        lines = [HEADER + tuple(probes)]
        for row in rows:
            share = (
                row["billed_input"] / reference["billed_input"]
                if reference and reference["billed_input"]
                else None
            )
            lines.append(
                (
                    row["policy"],
                    f"{row['billed_input']:,}",
                    f"{share:.0%}" if share is not None else "—",
                    f"{row['cost_usd']:.4f}" if row["cost_usd"] is not None else "—",
                    f"{row['cache_hit_rate']:.0%}" if row["cache_hit_rate"] is not None else "—",
                    str(row["cache_breaks"]),
                    f"{row['peak_window']:,}",
                    *(
                        probe["how"]
                        + (f" (left at call {probe['left_at_call']})" if probe["left_at_call"] else "")
                        for probe in row["probes"]
                    ),
                )
            )
        out = ["| " + " | ".join(lines[0]) + " |", "|" + "|".join("---" for _ in lines[0]) + "|"]
        out += ["| " + " | ".join(line) + " |" for line in lines[1:]]
        return "\n".join(out)
