from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import transaction

from ingest.keys import create_key
from ingest.models import Membership, Project


class Command(BaseCommand):
    help = "Create a project (or reuse an existing one) and print a new ingest key as the last line."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--owner", help="username to make an admin of the project")
        parser.add_argument("--name", help="display name (default: the slug)")

    def handle(self, *args, slug: str, owner: str | None, name: str | None, **options):
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(f"{slug!r} is not a valid slug (letters, digits, - and _)") from None
        user = None
        if owner:
            user = get_user_model().objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user named {owner!r}")
        with transaction.atomic():
            project, created = Project.objects.get_or_create(slug=slug, defaults={"name": name or slug})
            if user is not None:
                Membership.objects.update_or_create(
                    project=project, user=user, defaults={"role": Membership.Role.ADMIN}
                )
            key = create_key(project, name="createproject", user=user)
        self.stdout.write(f"{'created' if created else 'using existing'} project {project.slug}")
        # Scripts read the key from the last line: keep it last and alone.
        self.stdout.write(key)
