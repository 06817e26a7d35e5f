"""What people add while reviewing: notes, labels and bookmarks. (The trace data lives in ingest.)"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from ingest.models import Call, Project, Run


class Note(models.Model):
    """A note on a run, on one of its calls, or on one of its items; edits keep the earlier text."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_notes")
    call = models.ForeignKey(
        Call, null=True, blank=True, on_delete=models.CASCADE, related_name="review_notes"
    )
    item_id = models.CharField(max_length=500, blank=True)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["run", "created_at"], name="note_run_created")]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "call_seq": self.call.seq if self.call_id else None,
            "item_id": self.item_id or None,
            "author": self.author.username if self.author_id else None,
            "body": self.body,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            # Sorted here, not by the database: a list of notes prefetches their revisions.
            "revisions": [
                revision.to_dict()
                for revision in sorted(self.revisions.all(), key=lambda revision: revision.edited_at)
            ],
        }


class NoteRevision(models.Model):
    """A note's text before an edit."""

    note = models.ForeignKey(Note, on_delete=models.CASCADE, related_name="revisions")
    body = models.TextField()
    editor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    edited_at = models.DateTimeField(default=timezone.now)

    def to_dict(self) -> dict:
        return {
            "body": self.body,
            "editor": self.editor.username if self.editor_id else None,
            "edited_at": self.edited_at.isoformat(),
        }


class Label(models.Model):
    """A label on a run ("incident", or anything), with an optional link (a ticket, a postmortem)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=64)
    link = models.URLField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="label_unique")]
        indexes = [models.Index(fields=["project", "name"], name="label_project_name")]

    def to_dict(self) -> dict:
        return {"name": self.name, "link": self.link or None, "created_at": self.created_at.isoformat()}


class Bookmark(models.Model):
    """A call someone marked as worth coming back to."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    call = models.ForeignKey(Call, on_delete=models.CASCADE, related_name="bookmarks")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["call"], name="bookmark_unique")]


class Probe(models.Model):
    """Something followed through a run's windows and replays: an item id, a text or a regular expression.

    The run's facts and rules are probes without a row (``ctxcore.replay.standing_probes``)."""

    class Kind(models.TextChoices):
        ITEM = "item"
        TEXT = "text"
        REGEX = "regex"

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="probes")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    value = models.CharField(max_length=500)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "kind", "value"], name="probe_unique")]

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "value": self.value, "standing": False}


class OutboundGrant(models.Model):
    """An instance admin's leave for a project to make the server call out (re-ask its endpoint).

    Without it a project's admins cannot set an endpoint: anyone may create a project, and the server's
    network is the operator's to open, one project at a time (``CTXVIEW_OUTBOUND_ENABLED`` for all)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="outbound_grant")
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    granted_at = models.DateTimeField(default=timezone.now)


class ReaskEndpoint(models.Model):
    """The model endpoint a project's replays may re-ask (off until an admin sets it).

    The key is needed to call the endpoint, so unlike an ingest key it cannot be kept as a hash: it is
    stored sealed (``ctxview.sealing``), is bound to the provider and base URL it was given with (a
    change of either needs the key again), and is never read back out: pages and the API show only its
    last characters (``key_hint``)."""

    class Provider(models.TextChoices):
        ANTHROPIC = "anthropic"
        OPENAI = "openai"

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="reask_endpoint")
    provider = models.CharField(max_length=16, choices=Provider.choices)
    base_url = models.CharField(max_length=500)
    sealed_key = models.TextField()
    key_hint = models.CharField(max_length=8, default="")
    model = models.CharField(max_length=200)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    @property
    def masked_key(self) -> str:
        return f"…{self.key_hint}"

    @staticmethod
    def hint_of(key: str) -> str:
        return key[-4:] if len(key) >= 12 else ""

    def to_dict(self) -> dict:
        return {
            "provider": self.provider,
            "base_url": self.base_url,
            "model": self.model,
            "key": self.masked_key,
        }
