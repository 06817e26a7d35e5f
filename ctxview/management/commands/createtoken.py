from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from ctxview import writes


class Command(BaseCommand):
    help = "Create a personal API token for a user and print it as the last word of the last line."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--read-only", action="store_true", help="the token only reads")
        parser.add_argument("--name", default="createtoken", help="what the token is for")

    def handle(self, *args, username: str, read_only: bool, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        if not user.is_active:
            raise CommandError(f"user {username!r} is inactive: a token of theirs would not work")
        try:
            row, token = writes.create_token(user, name=name, read_only=read_only)
        except writes.Refused as exc:
            raise CommandError(str(exc)) from None
        access = "read-only" if row.read_only else "read and write"
        self.stdout.write(f"API token cvt_{row.token_id}_… for {user.username} ({access}); shown once:")
        # Scripts read the token as the last word of the last line: keep it there.
        self.stdout.write(token)
