"""``manage.py monitors list|evaluate|test ID``: the monitors, one evaluation tick now, a test
notification."""

import threading

from django.core.management.base import BaseCommand, CommandError

from ctxview.models import Monitor
from ctxview.monitors import engine


class Command(BaseCommand):
    help = "List the monitors, run one evaluation tick now (beat runs one every minute), or test-fire one."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        listing = commands.add_parser("list", help="every monitor with its state")
        listing.add_argument("--project", help="only this project's (its slug)")
        tick = commands.add_parser("evaluate", help="one evaluation tick now")
        tick.add_argument("ids", nargs="*", type=int, help="only these monitors")
        tick.add_argument(
            "--every", type=float, help="tick every this many seconds until stopped (embedded mode's beat)"
        )
        fire = commands.add_parser("test", help="send a test notification to every channel of a monitor")
        fire.add_argument("id", type=int)

    def handle(self, *args, action: str, **options):
        if action == "list":
            return self._list(options.get("project"))
        if action == "evaluate":
            if options.get("every"):
                stop = threading.Event()
                try:
                    engine.ticker(options["every"], stop)
                except KeyboardInterrupt:
                    stop.set()
                return None
            counts = engine.evaluate(ids=options["ids"] or None)
            return ", ".join(f"{count} {name}" for name, count in counts.items())
        monitor = Monitor.objects.select_related("project").filter(id=options["id"]).first()
        if monitor is None:
            raise CommandError(f"no monitor {options['id']}")
        episode = engine.test_fire(monitor)
        results = []
        for delivery in episode.deliveries.order_by("channel"):
            engine.deliver(delivery.id)  # now, unless its task (in-process, or a worker's) got there first
            delivery.refresh_from_db()
            state = "sent" if delivery.sent_at else f"not sent ({delivery.last_error or 'pending'})"
            results.append(f"{delivery.channel_type} {state}")
        return f"test episode {episode.id}: " + ("; ".join(results) or "the monitor has no channels")

    def _list(self, project: str | None) -> str:
        monitors = Monitor.objects.select_related("project").order_by("project__slug", "name")
        if project:
            monitors = monitors.filter(project__slug=project)
        lines = []
        for monitor in monitors:
            scope = ", ".join(f"{k}={v}" for k, v in monitor.scope().items()) or "whole project"
            channels = ", ".join(channel["type"] for channel in monitor.channels) or "no channels"
            muted = f" muted until {monitor.muted_until:%Y-%m-%d %H:%M}" if monitor.muted_until else ""
            lines.append(
                f"{monitor.id}\t{monitor.project.slug}\t{monitor.name}\t{monitor.kind}\t{monitor.state}{muted}"
                f"\t{scope}\t{channels}"
            )
        return "\n".join(lines) if lines else "no monitors"
