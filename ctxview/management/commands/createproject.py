from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ctxview import writes
from ingest.keys import create_key
from ingest.models import Project


class Command(BaseCommand):
    help = "Create a project (or reuse an existing one) and print a new ingest key as the last line."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--owner", help="username to make an admin of the project")
        parser.add_argument("--name", help="display name (default: the slug)")

    def handle(self, *args, slug: str, owner: str | None, name: str | None, **options):
        user = None
        if owner:
            user = get_user_model().objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user named {owner!r}")
        with transaction.atomic():
            project = Project.objects.filter(slug=slug).first()
            created = project is None
            try:
                if created:
                    project = writes.create_project(name or slug, owner=user, slug=slug)
                elif user is not None:
                    writes.add_member(project, username=user.username, role="admin")
            except writes.Refused as exc:
                raise CommandError(str(exc)) from None
            key = create_key(project, name="createproject", user=user)
        self.stdout.write(f"{'created' if created else 'using existing'} project {project.slug}")
        # Scripts read the key from the last line: keep it last and alone.
        self.stdout.write(key)
