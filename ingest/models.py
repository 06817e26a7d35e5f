"""Tenancy (projects, members, ingest keys) and the trace tables that ingest writes.

ingest owns and writes these tables; the ctxview app only reads them.

A foreign key with ``db_index=False`` leads a unique constraint or an index of its table already, which
serves every lookup by it: a second index would only cost each insert of the hot tables.
"""

import itertools
from collections.abc import Iterable

from django.conf import settings
from django.db import connection, models
from django.db.models import Q
from django.db.models.functions import Substr
from django.utils import timezone

from ctxcore.analysis.tools import offered
from ctxcore.vocabulary import expand
from ingest import compact
from ingest.lookups import text_array
from ingest.redact import DEFAULT_PATTERNS, Redactor


class PackedJSONField(models.BinaryField):
    """JSON stored deflated against a preset dictionary (ingest.compact.pack_json): a small value that
    repeats its keys on every row takes a tenth of its jsonb size. SQL cannot look inside it."""

    packs_value = True  # ingest.bulk prepares it for COPY

    def from_db_value(self, value, expression, connection):
        return None if value is None else compact.unpack_json(value)

    def to_python(self, value):
        return compact.unpack_json(value) if isinstance(value, bytes | memoryview) else value

    def get_prep_value(self, value):
        return None if value is None else compact.pack_json(value)


def default_redaction_patterns() -> list[list[str]]:
    return [list(pattern) for pattern in DEFAULT_PATTERNS]


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # Data policy. Runs (and their spans) older than retention_days are deleted; raw batches sooner.
    retention_days = models.PositiveIntegerField(default=30)
    raw_retention_days = models.PositiveIntegerField(default=3)
    # Hash-only: content is used for hashes and token counts while a batch is processed, then not kept.
    hash_only = models.BooleanField(default=False)
    # [name, regular expression] pairs masked in every string before a batch is stored.
    redaction_patterns = models.JSONField(default=default_redaction_patterns)
    # The project's own prices per model (USD per million tokens), over the built-in table:
    # [{"model", "input", "output", "cache_write_5m", "cache_write_1h", "cache_read"}].
    prices = models.JSONField(default=list)

    def __str__(self) -> str:
        return self.slug

    def redactor(self) -> Redactor:
        """The stored patterns; one that cannot run masks every string whole (see Redactor.unusable)."""
        return Redactor.from_stored(tuple(pattern) for pattern in self.redaction_patterns)


class Membership(models.Model):
    class Role(models.TextChoices):
        VIEWER = "viewer"
        EDITOR = "editor"
        ADMIN = "admin"

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="membership_unique")]


class IngestKey(models.Model):
    """A project's key. Only its SHA-256 is stored; the key itself is shown once, at creation."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=100, blank=True)
    key_id = models.CharField(max_length=16, unique=True)  # public part, used to find the row
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    revoked_at = models.DateTimeField(null=True, blank=True)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])


class RawBatch(models.Model):
    """One acknowledged OTLP export, stored before the receiver answers 200.

    ``body`` holds the validated request as zlib-compressed protobuf (JSON requests are converted), or
    a gzipped protobuf request as it was sent when nothing in it was removed or masked (``request()``
    reads either), so processing can fail, retry and be replayed from here without losing or
    duplicating data.
    """

    class Signal(models.TextChoices):
        TRACES = "traces"
        LOGS = "logs"

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="batches")
    signal = models.CharField(max_length=8, choices=Signal.choices)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    received_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)
    body = models.BinaryField()
    content_type = models.CharField(max_length=16)  # "protobuf" or "json": what the client sent
    wire_bytes = models.PositiveBigIntegerField()  # the body as received, before decompression
    item_count = models.PositiveIntegerField()  # spans or log records accepted
    rejected_count = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)
    redacted = models.PositiveIntegerField(default=0)  # strings masked before storing
    # The body recompressed harder once processed (ingest.retention.compact_raw_batches).
    compacted = models.BooleanField(default=False, db_default=False)

    class Meta:
        indexes = [models.Index(fields=["status", "received_at"], name="rawbatch_status_received")]


class Resource(models.Model):
    """An OTel resource (service, host, SDK...), stored once per project and content hash."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    hash = models.CharField(max_length=64)
    service_name = models.CharField(max_length=200, blank=True)
    attributes = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "hash"], name="resource_unique")]


class Span(models.Model):
    """A span in generic form: what OTLP sent, nothing interpreted yet."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    batch = models.ForeignKey(RawBatch, null=True, on_delete=models.SET_NULL, db_constraint=False)
    resource = models.ForeignKey(Resource, on_delete=models.CASCADE)
    trace_id = models.CharField(max_length=32)  # lower-case hex
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.TextField()
    kind = models.PositiveSmallIntegerField()
    start_time_unix_nano = models.BigIntegerField()
    end_time_unix_nano = models.BigIntegerField()
    status_code = models.PositiveSmallIntegerField(default=0)
    status_message = models.TextField(blank=True)
    scope_name = models.CharField(max_length=200, blank=True)
    scope_version = models.CharField(max_length=100, blank=True)
    attributes = models.JSONField()
    events = models.JSONField(default=list)
    links = models.JSONField(default=list)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            # With the start: on PostgreSQL the table is partitioned by it (ingest.partitions), and a
            # unique key there must hold the partition key. A redelivered span has the same start.
            models.UniqueConstraint(
                fields=["project", "trace_id", "span_id", "start_time_unix_nano"], name="span_unique"
            ),
        ]
        indexes = [models.Index(fields=["project", "start_time_unix_nano"], name="span_project_start")]

    def to_dict(self) -> dict:
        """The span as the API serves it (its resource is read: select it with the span)."""
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id or None,
            "name": self.name,
            "kind": self.kind,
            "start_time_unix_nano": self.start_time_unix_nano,
            "end_time_unix_nano": self.end_time_unix_nano,
            "status": {"code": self.status_code, "message": self.status_message},
            "service": self.resource.service_name,
            "scope": {"name": self.scope_name, "version": self.scope_version},
            "attributes": self.attributes,
            "events": self.events,
            "links": self.links,
        }


class LogRecord(models.Model):
    """A log record (GenAI content events arrive here), stored once per content hash."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    batch = models.ForeignKey(RawBatch, null=True, on_delete=models.SET_NULL, db_constraint=False)
    resource = models.ForeignKey(Resource, on_delete=models.CASCADE)
    record_hash = models.CharField(max_length=64)
    trace_id = models.CharField(max_length=32, blank=True)
    span_id = models.CharField(max_length=16, blank=True)
    time_unix_nano = models.BigIntegerField()
    observed_time_unix_nano = models.BigIntegerField()
    severity_number = models.PositiveSmallIntegerField(default=0)
    severity_text = models.CharField(max_length=50, blank=True)
    event_name = models.CharField(max_length=200, blank=True)
    scope_name = models.CharField(max_length=200, blank=True)
    scope_version = models.CharField(max_length=100, blank=True)
    body = models.JSONField(null=True)
    attributes = models.JSONField()
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        # The observed time is part of the hash too; it is the partition key on PostgreSQL.
        constraints = [
            models.UniqueConstraint(
                fields=["project", "record_hash", "observed_time_unix_nano"], name="logrecord_unique"
            )
        ]
        indexes = [models.Index(fields=["project", "trace_id", "span_id"], name="logrecord_span")]


class Run(models.Model):
    """One agent task or conversation, with totals and the state that numbers its next call."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="runs", db_index=False)
    key = models.CharField(max_length=200)
    key_source = models.CharField(max_length=60)  # which attribute named it, or "trace_id"
    service_name = models.CharField(max_length=200, blank=True)
    agent_name = models.CharField(max_length=200, blank=True)  # the session's root agent
    # What a person knows the run by (ingest.titles): the first user message of its first call, on one
    # line and shortened; blank when nothing gives one (the pages show the key then). Untrusted text.
    title = models.CharField(max_length=200, blank=True, default="")
    # A child conversation (its own session key) found to be a step of this session: its calls move here
    # (ingest.agent_sessions); it keeps no calls of that trace, only the link.
    parent_run = models.ForeignKey("self", null=True, on_delete=models.SET_NULL, related_name="child_runs")
    started_at = models.DateTimeField(null=True)
    last_call_at = models.DateTimeField(null=True)
    model_names = models.JSONField(default=list)
    call_count = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    # Usage totals: sums over the calls that report each figure (null: no call did).
    uncached = models.BigIntegerField(null=True)
    cache_write = models.BigIntegerField(null=True)
    cache_read = models.BigIntegerField(null=True)
    output = models.BigIntegerField(null=True)
    reasoning = models.BigIntegerField(null=True)
    prompt_total = models.BigIntegerField(null=True)
    # How many calls did not report each figure, so a partial total is never taken for a full one.
    usage_unknown = models.JSONField(default=dict)
    # Analysis: calls 1..analysed_seq are analysed; the state after the last one (zlib-compressed JSON,
    # ctxcore.analysis.run) lets the next call be analysed without reading the run again.
    analysed_seq = models.PositiveIntegerField(default=0)
    analysis_state = models.BinaryField(null=True)
    accounting = models.JSONField(null=True)
    # Carried state after the last call in order (ingest.turns.TurnState), so the next call is numbered
    # without reading the whole run.
    last_start_ns = models.BigIntegerField(null=True)
    last_span_id = models.CharField(max_length=16, blank=True)
    last_fingerprint = models.CharField(max_length=32, blank=True)
    last_invocation = models.CharField(max_length=16, blank=True)
    last_trace_id = models.CharField(max_length=32, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    USAGE_FIELDS = ("uncached", "cache_write", "cache_read", "output", "reasoning", "prompt_total")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "key"], name="run_unique")]
        indexes = [models.Index(fields=["project", "-started_at"], name="run_project_started")]

    # What a run export keeps of the run (ctxview.exchange; schemas/run-export-v1.schema.json).
    EXPORT_FIELDS = ("key", "key_source", "service_name", "agent_name")
    # What an export leaves out: this database's ids and links, the totals and the carried state an import
    # makes again from the calls (ingest.imports), the analysis and its state.
    NOT_EXPORTED = (
        *("id", "project", "parent_run", "started_at", "last_call_at", "model_names", "call_count"),
        *("turn_count", "usage_unknown", "analysed_seq", "analysis_state", "accounting", "last_start_ns"),
        *("last_span_id", "last_fingerprint", "last_invocation", "last_trace_id", "updated_at", "title"),
    )

    @property
    def label(self) -> str:
        """What the pages call the run: its title, or its key when it has none."""
        return self.title or self.key

    def usage_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.USAGE_FIELDS}

    def to_dict(self, url: str) -> dict:
        """The run as the API serves it; ``url`` is its page (the read side knows its URLs)."""
        return {
            "id": self.id,
            "project": self.project.slug,
            "key": self.key,
            "title": self.title or None,
            "key_source": self.key_source,
            "service": self.service_name,
            "agent": self.agent_name or None,
            "parent_run": self.parent_run_id,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "last_call_at": self.last_call_at.isoformat() if self.last_call_at else None,
            "calls": self.call_count,
            "turns": self.turn_count,
            "models": self.model_names,
            "usage": self.usage_dict(),
            "usage_unknown_calls": self.usage_unknown,
            "analysed_calls": self.analysed_seq,
            "accounting": self.accounting,
            "findings": self.findings_by_type(),
            "url": url,
        }

    def findings_by_type(self) -> dict[str, int]:
        counts = getattr(self, "finding_counts", None)  # set for a page of runs in one query
        if counts is None:
            counts = dict(
                self.findings.values_list("type")
                .annotate(count=models.Count("id"))
                .values_list("type", "count")
            )
        return counts

    def to_export(self) -> dict:
        return {name: getattr(self, name) for name in self.EXPORT_FIELDS}

    def count_call(self, usage: dict, model: str = "", agent_name: str = "", sign: int = 1) -> None:
        """Add a call's usage to the totals (``sign=-1`` takes it out); unknown figures are counted apart."""
        for name in self.USAGE_FIELDS:
            value = usage.get(name)
            if value is None:
                self.usage_unknown[name] = max(self.usage_unknown.get(name, 0) + sign, 0)
            else:
                setattr(self, name, (getattr(self, name) or 0) + sign * value)
        if sign > 0 and model and model not in self.model_names:
            self.model_names.append(model)
        if sign > 0 and agent_name and not self.agent_name:
            self.agent_name = agent_name


class ItemListManager(models.Manager):
    def decoded(self, list_ids: set[int]) -> dict[int, tuple[int, list[dict]]]:
        """``(depth, items)`` of these lists and of the lists they are based on, by id (one query)."""
        if not list_ids:
            return {}
        marks = ", ".join(["%s"] * len(list_ids))
        # The lists and their bases down to their snapshots (at most MAX_DEPTH + 1 rows each).
        rows = self.raw(
            "WITH RECURSIVE chain(id) AS ("
            f" SELECT id FROM ingest_itemlist WHERE id IN ({marks})"
            " UNION SELECT list.base_id FROM ingest_itemlist list JOIN chain ON list.id = chain.id"
            " WHERE list.base_id IS NOT NULL AND list.whole IS NULL"
            ") SELECT id, base_id, depth, ops, entered, whole FROM ingest_itemlist"
            " WHERE id IN (SELECT id FROM chain)",
            list(list_ids),
        )
        decoded: dict[int, tuple[int, list[dict]]] = {}
        for row in sorted(rows, key=lambda row: row.depth):  # a base is shallower than its lists
            if row.whole is not None:
                decoded[row.id] = (row.depth, compact.unpack(row.whole))
            else:
                decoded[row.id] = (row.depth, compact.decode(decoded[row.base_id][1], row.ops, row.entered))
        return decoded

    def load(self, calls: list["Call"]) -> None:
        """Give these calls their stored items."""
        lists = self.decoded({call.item_list_id for call in calls if call.item_list_id})
        for call in calls:
            call._items = lists[call.item_list_id][1] if call.item_list_id else []
            call._items_changed = False


class ItemList(models.Model):
    """A call's items in render order, stored as what changed since a base list (ingest.compact).

    Immutable: a call whose items change gets a new list, so a list another list is based on never
    changes under it. A list is ``depth`` lists away from a snapshot (one stored ``whole``; its base is
    not read), so rebuilding one reads at most ``MAX_DEPTH + 1`` rows. ``entered`` holds the items that
    were not in the run's list before it (a delta takes them from there; a snapshot has them in
    ``whole`` too): an item of a run is in the ``entered`` of the list where it entered the run, which
    is what search looks up (GIN index), without indexing every snapshot's whole list again.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    base = models.ForeignKey("self", null=True, on_delete=models.RESTRICT, related_name="+")
    depth = models.PositiveSmallIntegerField(default=0)
    ops = models.JSONField(default=list)
    entered = models.JSONField(default=list)
    whole = models.BinaryField(null=True)

    objects = ItemListManager()

    # Lists between a list and its snapshot: rebuilding a call's items reads at most MAX_DEPTH + 1 rows.
    MAX_DEPTH = 31


class CallQuerySet(models.QuerySet):
    """Calls that read their items together: the first ``call.items`` of a fetched chunk loads the
    item lists of the whole chunk in one query (a loop over a run's calls is not a query per call)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self._iterable_class is models.query.ModelIterable:
            self._iterable_class = _CallIterable


class _CallIterable(models.query.ModelIterable):
    GROUP = 200

    def __iter__(self):
        # A chunk is fetched whole before its first call is handed out: a loop that reads each call's
        # items as it reaches it would otherwise load a group holding that call alone, a query per call.
        calls = super().__iter__()
        while group := list(itertools.islice(calls, self.GROUP)):
            for call in group:
                call._items_group = group
            yield from group


class Call(models.Model):
    """One model request, its normalised usage and its manifest (items in render order)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="calls", db_index=False)
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    seq = models.PositiveIntegerField(null=True)  # 1-based order in the run; null until numbered
    turn = models.PositiveIntegerField(null=True)
    turn_hint = models.PositiveIntegerField(null=True)  # ctxview.turn, when the sender gave it
    user_fingerprint = models.CharField(max_length=32, blank=True)
    # The turn state carried after this call (ingest.turns.TurnState), so renumbering can start here.
    carried_fingerprint = models.CharField(max_length=32, blank=True)
    carried_invocation = models.CharField(max_length=16, blank=True)
    name = models.TextField(blank=True)
    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    started_at = models.DateTimeField()
    provider = models.CharField(max_length=100, blank=True)
    operation = models.CharField(max_length=50, blank=True)
    request_model = models.CharField(max_length=200, blank=True)
    response_model = models.CharField(max_length=200, blank=True)
    response_id = models.CharField(max_length=200, blank=True)
    # The call's agent and agent invocation (ingest.agents), resolved from its ancestors when they arrive.
    agent_name = models.CharField(max_length=200, blank=True)
    agent_invocation = models.CharField(max_length=16, blank=True)  # the invocation's agent span id
    parent_invocation = models.CharField(max_length=16, blank=True)
    agent_entry = models.CharField(max_length=16, blank=True)  # root, handoff, agent_as_tool, ...
    agent_depth = models.PositiveSmallIntegerField(default=0)  # > 0: inside a tool or child run
    root_invocation = models.CharField(max_length=16, blank=True)  # the top of its chain: the turn's
    # Tools its agent's span offers beside ``tool_definitions``: the sub-agents it declares (names).
    agent_tools = models.JSONField(default=list)
    uncached = models.BigIntegerField(null=True)
    cache_write = models.BigIntegerField(null=True)
    cache_read = models.BigIntegerField(null=True)
    output = models.BigIntegerField(null=True)
    reasoning = models.BigIntegerField(null=True)
    prompt_total = models.BigIntegerField(null=True)
    usage_raw = models.JSONField(default=dict)  # the figures as reported, by attribute name
    notes = models.JSONField(default=list)
    content_captured = models.BooleanField(default=False)
    manifest_source = models.CharField(max_length=10, default="none")  # explicit | derived | none
    manifest_error = models.TextField(blank=True)
    # The items, read and set as ``items`` (ingest.itemlists); null: no items.
    item_list = models.ForeignKey(ItemList, null=True, on_delete=models.RESTRICT, related_name="+")
    excluded = models.JSONField(default=list)
    budget = models.JSONField(null=True)
    prompt_version = models.CharField(max_length=200, blank=True)
    tool_calls = models.JSONField(default=list)
    tool_definitions = models.JSONField(null=True)  # names, or null when the call did not report them
    # A request that sent only its new items (ingest.continuations): the response it continues, and the
    # response whose turns its window still lacks ("" none: not continuing, or rebuilt). The call's
    # answer as items (stored form, no content), for a request that continues its response.
    continues_response = models.CharField(max_length=200, blank=True)
    window_gap = models.CharField(max_length=200, blank=True)
    output_items = models.JSONField(default=list)
    finish_reasons = models.JSONField(default=list)
    analysis = PackedJSONField(null=True)  # buckets, cache, conflicts (ctxcore.analysis.CallAnalysis)
    # The analysis's window total (buckets.total), for SQL: a run's peak window when usage is unknown.
    window_total = models.BigIntegerField(null=True)

    # What a run export keeps of a call (ctxview.exchange; schemas/run-export-v1.schema.json).
    EXPORT_FIELDS = (
        "trace_id",
        "span_id",
        "parent_span_id",
        "seq",
        "turn",
        "turn_hint",
        "user_fingerprint",
        "carried_fingerprint",
        "carried_invocation",
        "name",
        "start_ns",
        "end_ns",
        "provider",
        "operation",
        "request_model",
        "response_model",
        "response_id",
        "agent_name",
        "usage_raw",
        "notes",
        "content_captured",
        "manifest_source",
        "manifest_error",
        "items",
        "excluded",
        "budget",
        "prompt_version",
        "tool_calls",
        "tool_definitions",
        "finish_reasons",
        "agent_invocation",
        "parent_invocation",
        "agent_entry",
        "agent_depth",
        "root_invocation",
        "agent_tools",
    )
    # What an export leaves out: this database's ids and links, and what an import makes again (the
    # start time from start_ns, the item list from ``items``, the analysis). tests/ctxview/test_import.py
    # checks that every field is in one of these, or in Run.USAGE_FIELDS (exported as ``usage``).
    # What rebuilding a continued request's window needs is left out too: an exported window is exported
    # as it was rebuilt, and an import adds no later calls to its run.
    NOT_EXPORTED = (
        "id",
        "project",
        "run",
        "started_at",
        "item_list",
        "analysis",
        "window_total",
        "continues_response",
        "window_gap",
        "output_items",
    )

    objects = CallQuerySet.as_manager()

    # ``items`` as last set or loaded (None: not loaded yet); whether they were set since the last save.
    _items: list[dict] | None = None
    _items_changed = False
    _items_group: list | None = None
    # The Item records ``items`` were made of, while the batch that derived them holds the call (None
    # once the items are set or loaded otherwise): its analysis reads them instead of the stored dicts.
    made_items: tuple | None = None

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="call_unique")]
        indexes = [
            models.Index(fields=["run", "seq"], name="call_run_seq"),
            models.Index(fields=["run", "start_ns"], name="call_run_start"),
            models.Index(fields=["project", "trace_id", "parent_span_id"], name="call_parent"),
            # The call that answered a response a request continues, and the calls waiting for one.
            models.Index(
                fields=["project", "response_id"], name="call_response", condition=~Q(response_id="")
            ),
            models.Index(
                fields=["project", "window_gap"], name="call_window_gap", condition=~Q(window_gap="")
            ),
        ]

    def save(self, *args, **kwargs) -> None:
        fields = kwargs.get("update_fields")
        if self._items_changed and (fields is None or "item_list" in fields):
            # Lists are written for many calls at once, based on their run's previous lists.
            raise ValueError("store the call's new items first: ingest.itemlists.store(project_id, calls)")
        super().save(*args, **kwargs)

    @property
    def model(self) -> str:
        return self.response_model or self.request_model

    @property
    def items(self) -> list[dict]:
        """The items in render order, stored without defaults (read them, don't change them in place)."""
        if self._items is None:
            group = self._items_group or [self]
            ItemList.objects.load([call for call in group if call._items is None] or [self])
        return self._items

    @items.setter
    def items(self, value: list[dict]) -> None:
        self._items = list(value)
        self._items_changed = True
        self.made_items = None

    def full_items(self) -> list[dict]:
        """The items with every field and their position (they are stored without defaults)."""
        return expand(self.items)

    def usage_dict(self) -> dict:
        return {name: getattr(self, name) for name in Run.USAGE_FIELDS}

    def to_dict(self, url: str, contents: dict | None = None) -> dict:
        """The call as the API serves it; ``contents`` (hash -> Content) adds each item's content."""
        items = self.full_items()
        if contents is not None:
            for item in items:
                content = contents.get(item["hash"])
                item["content"] = content.text if content else None
                item["content_truncated"] = bool(content and content.truncated)
        tools = offered(self.tool_definitions, self.agent_tools)
        return {
            "id": self.id,
            "url": url,
            "run": self.run_id,
            "seq": self.seq,
            "turn": self.turn,
            "agent": self.agent_name or None,
            "agent_invocation": self.agent_invocation or None,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "name": self.name,
            "model": self.model or None,
            "request_model": self.request_model or None,
            "provider": self.provider or None,
            "started_at": self.started_at.isoformat(),
            "duration_ms": round((self.end_ns - self.start_ns) / 1e6, 3),
            "usage": self.usage_dict(),
            "usage_reported": self.usage_raw,
            "content_captured": self.content_captured,
            "manifest_source": self.manifest_source,
            "manifest_error": self.manifest_error or None,
            "notes": self.notes,
            "items": items,
            "excluded": self.excluded,
            "budget": self.budget,
            "prompt_version": self.prompt_version or None,
            "tool_calls": self.tool_calls,
            # With the tools its agent's span offers (derived: named again in ``agent_tools``).
            "tool_definitions": list(tools) if tools is not None else None,
            "agent_tools": self.agent_tools,
            "finish_reasons": self.finish_reasons,
            "cache": self.cache_summary(),
            "buckets": (self.analysis or {}).get("buckets"),
            "conflicts": (self.analysis or {}).get("conflicts"),
        }

    def cache_summary(self) -> dict | None:
        """The call's cache analysis; null until the call is analysed."""
        if not self.analysis:
            return None
        cache = self.analysis["cache"]
        return {
            "expected_read": cache.get("expected_read"),
            "reported_read": cache.get("reported_read"),
            "invalidator_item_id": cache.get("invalidator_item_id"),
            "cause": cache.get("cause"),
            "broke": cache.get("broke"),
            "tokens_rewritten": cache.get("tokens_rewritten"),
            "cost_usd": cache.get("cost_usd"),
            "detail": cache.get("detail"),
            "provider_diagnosis": cache.get("provider_diagnosis"),
            "disagrees": cache.get("disagrees"),
        }

    def to_export(self) -> dict:
        """The call as a run export keeps it (and an import reads it back)."""
        return {**{name: getattr(self, name) for name in self.EXPORT_FIELDS}, "usage": self.usage_dict()}


class ContentManager(models.Manager):
    COLUMNS = ("text", "tokens", "truncated")  # what by_hash may read of each text

    def by_hash(self, project_id: int, hashes: Iterable[str], *columns: str, chars: int | None = None):
        """``(hash, *columns)`` of the project's stored texts among ``hashes`` (``chars``: the text cut
        to that many characters).

        PostgreSQL: one probe of the (project, hash) index per hash. With ``hash IN (...)`` the planner
        weighed the hashes against its statistics of the project's contents, which lag behind a
        fast-growing table, and read every content row of the project to filter them: 60-110 ms a
        lookup at 100,000 texts, within a two-minute load, growing with the project."""
        unknown = set(columns) - set(self.COLUMNS)
        if unknown:  # only known columns reach the SQL
            raise KeyError(f"by_hash reads {', '.join(self.COLUMNS)}, not {', '.join(sorted(unknown))}")
        wanted = sorted({value for value in hashes if value})
        if not wanted:
            return []
        if connection.vendor != "postgresql":
            rows = self.filter(project_id=project_id, hash__in=wanted)
            if chars is not None:
                rows = rows.annotate(text_cut=Substr("text", 1, chars))
            cut = ["text_cut" if name == "text" and chars is not None else name for name in columns]
            return list(rows.values_list("hash", *cut))
        cut = f"left(found.text, {int(chars)})" if chars is not None else "found.text"
        outer = [cut if name == "text" else f"found.{name}" for name in columns]
        array, params = text_array(wanted)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {', '.join(['wanted.hash', *outer])}"
                f" FROM unnest({array}) AS wanted(hash)"
                f" CROSS JOIN LATERAL (SELECT {', '.join(columns) or '1'} FROM ingest_content"
                " WHERE project_id = %s AND hash = wanted.hash LIMIT 1) AS found",
                [*params, project_id],
            )
            return cursor.fetchall()


class Content(models.Model):
    """Item content, stored once per project and hash: a 200-call run does not store its history 200 times."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    hash = models.CharField(max_length=32)
    text = models.TextField()
    truncated = models.BooleanField(default=False)
    tokens = models.PositiveIntegerField(null=True)

    objects = ContentManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "hash"], name="content_unique")]


class Operation(models.Model):
    """A tool execution or an agent invocation span."""

    class Kind(models.TextChoices):
        TOOL = "tool"
        AGENT = "agent"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    run_key = models.CharField(max_length=200)
    name = models.CharField(max_length=200, blank=True)
    call_id = models.CharField(max_length=200, blank=True)
    arguments_bytes = models.PositiveIntegerField(null=True)
    result_bytes = models.PositiveIntegerField(null=True)
    start_ns = models.BigIntegerField()
    end_ns = models.BigIntegerField()
    # What the span adds to its tool execution beyond the shared keys (an MCP span: its method, session and
    # server), by attribute name (``families.tool_details``).
    details = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "trace_id", "span_id"], name="operation_unique")
        ]


class Finding(models.Model):
    """Something worth a person's attention, found by the analyses; run-level ones have no call."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="findings", db_index=False)
    call_seq = models.PositiveIntegerField(null=True)
    type = models.CharField(max_length=40)
    severity = models.CharField(max_length=10)
    item_id = models.CharField(max_length=500, blank=True)
    cause = models.CharField(max_length=60, blank=True)
    evidence = models.JSONField(default=dict)
    fix = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["run", "call_seq"], name="finding_run_seq"),
            models.Index(fields=["project", "type"], name="finding_project_type"),
        ]

    def to_dict(self) -> dict:
        return {
            "type": self.type,
            "severity": self.severity,
            "call_seq": self.call_seq,
            "item_id": self.item_id or None,
            "cause": self.cause or None,
            "evidence": self.evidence,
            "fix": self.fix,
        }


class AnalysisCheckpoint(models.Model):
    """The analysis state after every CHECKPOINT_EVERY-th call: a late call restarts the analysis here."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    seq = models.PositiveIntegerField()
    state = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="checkpoint_unique")]


# The monitors' roll-ups are ingest's models too, declared beside the code that writes them.
from ingest.rollups import FirstSeen, Rollup  # noqa: E402, F401
