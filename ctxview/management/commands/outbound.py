"""Which projects may make the server call out (re-ask): ``manage.py outbound list``, ``outbound allow
SLUG``, ``outbound revoke SLUG``. The operator's way to grant a project without a superuser login; the
instance-wide switch is CTXVIEW_OUTBOUND_ENABLED."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ctxview import writes
from ctxview.models import OutboundGrant, ReaskEndpoint
from ingest.models import Project


class Command(BaseCommand):
    help = "List, allow or revoke the projects that may make the server call out (re-ask)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "allow", "revoke"])
        parser.add_argument("slug", nargs="?", help="the project (allow, revoke)")

    def handle(self, *args, action, slug, **options):
        if action == "list":
            state = "on" if settings.CTXVIEW_OUTBOUND_ENABLED else "off (CTXVIEW_OUTBOUND_ENABLED)"
            self.stdout.write(f"outbound calls on this instance: {state}")
            endpoints = dict(ReaskEndpoint.objects.values_list("project_id", "base_url"))
            for grant in OutboundGrant.objects.select_related("project").order_by("project__slug"):
                where = endpoints.get(grant.project_id, "no endpoint set")
                self.stdout.write(f"{grant.project.slug}\tallowed {grant.granted_at:%Y-%m-%d}\t{where}")
            return
        if not slug:
            raise CommandError(f"outbound {action} needs the project's slug")
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"no project with the slug {slug!r}")
        if action == "allow":
            writes.grant_outbound(project, None)
            self.stdout.write(
                f"{slug} may call out"
                + ("" if settings.CTXVIEW_OUTBOUND_ENABLED else " once CTXVIEW_OUTBOUND_ENABLED is on")
            )
        else:
            writes.revoke_outbound(project)
            self.stdout.write(f"{slug} may no longer call out; its re-ask endpoint was removed")
