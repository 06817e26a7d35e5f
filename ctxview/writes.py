"""Every write of the review page, the settings page and the API, validated here once.

The API passes a JSON body's values as they came; a page converts its form's strings first (``form_int``,
a checkbox to a bool, the redaction lines to pairs) and then calls the same function. A wrong value raises
``Refused`` with the sentence both show, so the page and the API give the same answer for the same input.
Who may write is checked by the caller (a session's role on the page, a key or a session in the API).
"""

from functools import partial

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from ctxcore.analysis import prices
from ctxview import outbound, sealing, tokens
from ctxview.access import has_role, outbound_off
from ctxview.models import (
    ApiToken,
    Bookmark,
    Label,
    Note,
    NoteRevision,
    OutboundGrant,
    Probe,
    ReaskEndpoint,
)
from ctxview.replay import MAX_PROBES, ProbeError, clean_probe
from ingest.analyse import invalidate
from ingest.models import Call, Membership, Project, Run
from ingest.redact import PatternError, Redactor
from ingest.retention import delete_runs
from ingest.tasks import enqueue_analysis

NOTE_LIMIT = 20_000
ITEM_ID_LIMIT = 500  # Note.item_id's max_length
LABEL_LIMIT = 64  # Label.name's max_length
LINK_LIMIT = 500  # Label.link's max_length
TOKEN_NAME_LIMIT = 100  # ApiToken.name's max_length
MAX_SEQ = 2**31 - 1  # a call's seq is a 32-bit integer
# Dollars per million tokens; far above any real price, and keeps every figure finite (1e400 is inf).
MAX_PRICE = 1_000_000
PRICE_FIELDS = prices.FIELDS  # what a stored price row may set (analysis.prices.table_from_rows reads it)


class Refused(Exception):
    """A write that cannot be done; the message is shown as is (the API adds the status)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def form_int(value: str) -> int | str:
    """A form's whole number as an int (ASCII digits only: ``"²".isdigit()`` is true but int() refuses
    it); anything else is returned as it is, for the write to refuse with its own message."""
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() else value


def text(value, name: str, limit: int, required: bool = True) -> str:
    """A string field, stripped; refused when it is no string, empty (if required) or too long."""
    if not isinstance(value, str) or (required and not value.strip()):
        raise Refused(f"{name} must be a non-empty string" if required else f"{name} must be a string")
    if len(value) > limit:
        raise Refused(f"{name} is longer than {limit} characters")
    return value.strip()


def _whole(value, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum


def call_by_seq(run: Run, seq) -> Call:
    """The run's call numbered ``seq``."""
    call = run.calls.filter(seq=seq).first() if _whole(seq, MAX_SEQ) else None
    if call is None:
        raise Refused("call_seq names no call of this run")
    return call


# --- Notes ---------------------------------------------------------------------------------------


def add_note(run: Run, user, *, body, call_seq=None, item_id="") -> Note:
    """A note on the run, on one of its calls (``call_seq``) or on one of its items (``item_id``)."""
    call = None if call_seq is None else call_by_seq(run, call_seq)
    return Note.objects.create(
        project=run.project,
        run=run,
        call=call,
        item_id=text(item_id, "item_id", ITEM_ID_LIMIT, required=False),
        author=user,
        body=text(body, "body", NOTE_LIMIT),
    )


def check_may_change_note(note: Note, user) -> None:
    if note.author_id != user.id and not has_role(user, note.project, Membership.Role.ADMIN):
        raise Refused("only the note's author or an admin may change it", 403)


def edit_note(note: Note, user, body) -> Note:
    """A new text for the note; the earlier one is kept as a revision."""
    check_may_change_note(note, user)
    body = text(body, "body", NOTE_LIMIT)
    NoteRevision.objects.create(note=note, body=note.body, editor=user)
    note.body, note.updated_at = body, timezone.now()
    note.save(update_fields=["body", "updated_at"])
    return note


def delete_note(note: Note, user) -> None:
    check_may_change_note(note, user)
    note.delete()


# --- Labels and bookmarks ------------------------------------------------------------------------


def label_name(value) -> str:
    """A label's name as stored (and as filtered): lower-cased."""
    return text(value, "name", LABEL_LIMIT).lower()


def add_label(run: Run, user, *, name, link="") -> Label:
    """Labels the run (again: a new link replaces the old one)."""
    name = label_name(name)
    link = text(link, "link", LINK_LIMIT, required=False)
    if link and not link.startswith(("http://", "https://")):
        raise Refused("link must be an http(s) URL")
    label, _ = Label.objects.update_or_create(
        run=run, name=name, defaults={"project": run.project, "link": link, "created_by": user}
    )
    return label


def remove_label(run: Run, name: str) -> bool:
    """Removes the label named so, in any case (labels are stored lower-case, as ``add_label`` wrote them)."""
    deleted, _ = run.labels.filter(name=name.strip().lower() if isinstance(name, str) else "").delete()
    return bool(deleted)


def set_bookmark(call: Call, user, on: bool) -> None:
    if on:
        Bookmark.objects.get_or_create(call=call, defaults={"project": call.project, "created_by": user})
    else:
        Bookmark.objects.filter(call=call).delete()


def add_probe(run: Run, user, *, kind, value) -> Probe:
    """A probe on the run (what replay looks for in each window); the same probe twice is refused (409),
    on the page as by the API."""
    # The cap before the pattern is compiled: a full run costs no compile at all.
    if Probe.objects.filter(run=run).count() >= MAX_PROBES:
        raise Refused(f"a run has at most {MAX_PROBES} probes")
    try:
        kind, value = clean_probe(kind, value)
    except ProbeError as exc:
        raise Refused(str(exc)) from None
    try:
        with transaction.atomic():
            return Probe.objects.create(project=run.project, run=run, kind=kind, value=value, created_by=user)
    except IntegrityError:
        raise Refused(f"this probe is already on the run ({kind} {value!r})", 409) from None


def remove_probe(run: Run, probe_id: int) -> None:
    deleted, _ = Probe.objects.filter(run=run, id=probe_id).delete()
    if not deleted:
        raise Refused("no such probe on this run", 404)


def delete_run(run: Run) -> dict:
    return delete_runs(run.project_id, [run.id])


# --- A project's settings ------------------------------------------------------------------------

POLICY_FIELDS = ("retention_days", "raw_retention_days", "hash_only", "redaction_patterns")


def update_policy(project: Project, changes: dict) -> None:
    """Sets the policy fields ``changes`` names (others are left alone), all checked before any is set."""
    for name in ("retention_days", "raw_retention_days"):
        if name in changes and not (_whole(changes[name], 3650) and changes[name] >= 1):
            raise Refused(f"{name} must be a whole number of days from 1 to 3650")
    if "hash_only" in changes and not isinstance(changes["hash_only"], bool):
        raise Refused("hash_only must be true or false")
    if "redaction_patterns" in changes:
        patterns = changes["redaction_patterns"]
        if not isinstance(patterns, list) or not all(
            isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)
            for entry in patterns
        ):
            raise Refused("redaction_patterns must be a list of [name, regular expression] pairs")
        try:
            Redactor.from_patterns(tuple(entry) for entry in patterns)
        except PatternError as exc:
            raise Refused(str(exc)) from None
    for name in POLICY_FIELDS:
        if name in changes:
            setattr(project, name, changes[name])
    project.save()


def clean_prices(rows) -> list[dict]:
    """A project's own prices as given, checked; Refused says what is wrong."""
    if not isinstance(rows, list):
        raise Refused('the body must be {"prices": [{"model": ..., "input": ..., "output": ...}, ...]}')
    for index, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("model"), str) or not row["model"].strip():
            raise Refused(f"prices[{index}] needs a model name")
        for name in PRICE_FIELDS:
            value = row.get(name)
            required = name in ("input", "output")
            if (value is None and required) or (
                value is not None
                and (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not 0 <= value <= MAX_PRICE
                )
            ):
                raise Refused(
                    f"prices[{index}].{name} must be a number of dollars per million tokens"
                    f" from 0 to {MAX_PRICE:,}"
                )
    # An optional rate given as null is not given: the table derives it from the input rate.
    return [
        {"model": row["model"].strip(), **{n: row[n] for n in PRICE_FIELDS if row.get(n) is not None}}
        for row in rows
    ]


def set_prices(project: Project, rows) -> None:
    """Replaces the project's own prices and analyses every run of the project again."""
    cleaned = clean_prices(rows)
    with transaction.atomic():
        project.prices = cleaned
        project.save(update_fields=["prices"])
        reanalyse(project)


def reanalyse(project: Project) -> None:
    """Costs are summed along the analysis: new prices mean analysing every run from its first call."""
    for run in Run.objects.filter(project=project).only("id", "analysed_seq"):
        invalidate(run, 1)
        transaction.on_commit(partial(enqueue_analysis, run.id), robust=True)


def set_reask_endpoint(project: Project, user, *, provider, base_url, model, key="") -> ReaskEndpoint:
    """The endpoint the project's replays may re-ask. The base URL must be one the server may call
    (``ctxview.outbound``); an empty key keeps the one already set only while the provider and base URL
    stay the same (a page never shows the key back, so a form cannot resend it, and a key must never
    reach a host it was not given for)."""
    off = outbound_off(project)
    if off:
        raise Refused(off, 403)
    if provider not in ReaskEndpoint.Provider.values:
        raise Refused(f"provider must be one of {', '.join(ReaskEndpoint.Provider.values)}")
    base_url = text(base_url, "base_url", 500)
    try:
        outbound.check_url(base_url)
    except outbound.OutboundRefused as exc:
        raise Refused(f"base_url: {exc}") from None
    model = text(model, "model", 200)
    key = text(key, "key", 500, required=False)
    if any(c.isspace() or not c.isprintable() for c in key):
        raise Refused("key must not contain spaces or control characters")
    current = ReaskEndpoint.objects.filter(project=project).first()
    if not key:
        if current is None:
            raise Refused("key must be given the first time")
        if (current.provider, current.base_url) != (provider, base_url):
            raise Refused(
                "key must be given again: a key is kept only for the provider and base URL it was set with"
            )
    sealed = {"sealed_key": sealing.seal(key), "key_hint": ReaskEndpoint.hint_of(key)} if key else {}
    endpoint, _ = ReaskEndpoint.objects.update_or_create(
        project=project,
        defaults={
            "provider": provider,
            "base_url": base_url,
            "model": model,
            **sealed,
            "updated_by": user,
            "updated_at": timezone.now(),
        },
    )
    return endpoint


def remove_reask_endpoint(project: Project) -> None:
    ReaskEndpoint.objects.filter(project=project).delete()


def grant_outbound(project: Project, user) -> None:
    """An instance admin lets the project call out (its admins may then set an endpoint)."""
    OutboundGrant.objects.get_or_create(project=project, defaults={"granted_by": user})


def revoke_outbound(project: Project) -> None:
    """Takes the grant back; the endpoint and its key go with it, so nothing is sent until granted again."""
    with transaction.atomic():
        OutboundGrant.objects.filter(project=project).delete()
        ReaskEndpoint.objects.filter(project=project).delete()


def create_project(name: str, owner=None, slug: str | None = None) -> Project:
    """A new project, its slug made from ``name`` unless given, ``owner`` (if any) its admin. Refused
    (409) when the slug is taken, (400) when there is none to make."""
    name = (name or "").strip()[:200]
    slug = slugify(name)[:64] if slug is None else slug
    if not slug:
        raise Refused("a project needs a name with at least one letter or digit")
    try:
        validate_slug(slug)
    except ValidationError:
        raise Refused(f"{slug!r} is not a valid slug (letters, digits, - and _)") from None
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name or slug)
            if owner is not None:
                Membership.objects.create(project=project, user=owner, role=Membership.Role.ADMIN)
    except IntegrityError:
        raise Refused(f"a project called {slug!r} already exists", 409) from None
    return project


def add_member(project: Project, *, username, role) -> Membership:
    user = get_user_model().objects.filter(username=text(username, "username", 150)).first()
    if user is None:
        raise Refused(f"no user named {username.strip()!r}")
    if role not in Membership.Role.values:
        raise Refused("unknown role")
    membership, _ = Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return membership


def remove_member(project: Project, *, username) -> None:
    membership = Membership.objects.filter(project=project, user__username=username).first()
    if membership is None:
        raise Refused("no such member")
    admins = Membership.objects.filter(project=project, role=Membership.Role.ADMIN)
    if membership.role == Membership.Role.ADMIN and admins.count() == 1:
        raise Refused("a project keeps at least one admin")
    membership.delete()


# --- Personal API tokens ---------------------------------------------------------------------------


def create_token(user, *, name="", read_only=False) -> tuple[ApiToken, str]:
    """A personal API token of ``user``: the row, and the token itself, shown once (only its hash is kept)."""
    if not isinstance(read_only, bool):
        raise Refused("read_only must be true or false")
    return tokens.create_token(
        user, name=text(name, "name", TOKEN_NAME_LIMIT, required=False), read_only=read_only
    )


def revoke_token(user, token_id) -> ApiToken:
    """Revokes one of the user's own tokens (another's is as unknown as no token: a 404)."""
    token = ApiToken.objects.filter(user=user, token_id=token_id).first()
    if token is None:
        raise Refused("no such token", 404)
    token.revoke()
    return token
