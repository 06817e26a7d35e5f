"""What people add while reviewing (notes, labels, bookmarks), and the monitors with their alerts. (The trace
data lives in ingest.)"""

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


class ApiToken(models.Model):
    """A user's personal API token (``cvt_<token_id>_<secret>``, ``ctxview.tokens``): the JSON API as that
    user, reads and writes (only reads when ``read_only``). Only its SHA-256 is stored; the token itself is
    shown once, at creation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    token_id = models.CharField(max_length=16, unique=True)  # public part, used to find the row
    token_hash = models.CharField(max_length=64)
    read_only = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


class Monitor(models.Model):
    """A project's watch over its roll-ups (``ingest.rollups``), evaluated every minute
    (``ctxview.monitors``): ok until its condition holds, then firing for one episode until it clears.

    ``channels``: ``[{"type": "webhook" | "slack" | "email", "url" | "to", "sealed_secret", "hint"}]``; a
    webhook's signing secret and a Slack URL (the URL is the credential) are stored sealed
    (``ctxview.sealing``) and never shown again."""

    class Kind(models.TextChoices):
        CACHE_BREAK_CAUSE = "cache_break_cause"
        HIT_RATE_DROP = "hit_rate_drop"
        COST_SPIKE = "cost_spike"
        FINDING_TYPE = "finding_type"
        WINDOW_SIZE = "window_size"

    class State(models.TextChoices):
        OK = "ok"
        FIRING = "firing"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="monitors")
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    params = models.JSONField(default=dict)
    # The scope: blank is any.
    service = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, blank=True)
    label = models.CharField(max_length=64, blank=True)
    agent = models.CharField(max_length=200, blank=True)
    channels = models.JSONField(default=list)
    state = models.CharField(max_length=8, choices=State.choices, default=State.OK)
    muted_until = models.DateTimeField(null=True, blank=True)
    cooldown_minutes = models.PositiveIntegerField(default=10)
    # The first sightings (ingest.rollups.FirstSeen) up to this id have been looked at.
    seen_cursor = models.BigIntegerField(default=0)
    # The baseline kinds' sums over the whole hours of their baseline, with the hour and scope they are
    # for (``kinds.baseline``): taken again once an hour, not summed over days of roll-ups every tick.
    baseline = models.JSONField(default=dict, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="monitor_unique_name")]
        indexes = [models.Index(fields=["project", "state"], name="monitor_project_state")]

    def scope(self) -> dict:
        return {
            name: getattr(self, name)
            for name in ("service", "model", "label", "agent")
            if getattr(self, name)
        }

    def muted(self, now) -> bool:
        return self.muted_until is not None and self.muted_until > now

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "project": self.project.slug,
            "name": self.name,
            "kind": self.kind,
            "params": self.params,
            "scope": self.scope(),
            "channels": [
                {
                    key: value
                    for key, value in channel.items()
                    if key != "sealed_secret" and key != "sealed_url"
                }
                for channel in self.channels
            ],
            "state": self.state,
            "muted_until": self.muted_until.isoformat() if self.muted_until else None,
            "cooldown_minutes": self.cooldown_minutes,
            "created_at": self.created_at.isoformat(),
            "evaluated_at": self.evaluated_at.isoformat() if self.evaluated_at else None,
        }


class AlertEpisode(models.Model):
    """One stretch of a monitor firing, from the tick that saw its condition to the one that saw it clear;
    ``cause`` names what set it off (a cause of cache breaks, its item and first call), ``evidence`` the
    figures since (calls, tokens, cost so far), brought up to date at every tick while it fires."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="episodes")
    started_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    test = models.BooleanField(default=False)  # a test-fire: resolved as it is sent
    muted = models.BooleanField(default=False)  # began while the monitor was muted: nothing was sent
    cause = models.JSONField(default=dict)
    evidence = models.JSONField(default=dict)

    class Meta:
        indexes = [models.Index(fields=["monitor", "-started_at"], name="episode_monitor_started")]

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "monitor": {"id": self.monitor_id, "name": self.monitor.name, "kind": self.monitor.kind},
            "state": "resolved" if self.resolved_at else "firing",
            "started_at": self.started_at.isoformat(),
            "resolved_at": self.resolved_at.isoformat() if self.resolved_at else None,
            "test": self.test,
            "muted": self.muted,
            "cause": self.cause,
            "evidence": self.evidence,
            "deliveries": [delivery.to_dict() for delivery in self.deliveries.all()],
        }


class Delivery(models.Model):
    """One notification of an episode (firing or resolved) to one channel, and its attempts."""

    class State(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"

    episode = models.ForeignKey(AlertEpisode, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.PositiveSmallIntegerField()  # its index in the monitor's channels
    channel_type = models.CharField(max_length=8)
    state = models.CharField(max_length=8, choices=State.choices)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)  # null: sent, or given up
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["episode", "channel", "state"], name="delivery_unique"),
        ]
        indexes = [models.Index(fields=["next_attempt_at"], name="delivery_due")]

    def to_dict(self) -> dict:
        return {
            "channel": self.channel,
            "type": self.channel_type,
            "state": self.state,
            "attempts": self.attempts,
            "sent_at": self.sent_at.isoformat() if self.sent_at else None,
            "last_error": self.last_error or None,
            "pending": self.next_attempt_at is not None,
        }
