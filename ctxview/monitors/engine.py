"""The evaluation tick and the notifications' delivery.

A tick looks at every monitor (or the ones named), each in its own transaction with its row locked, so
two ticks at once (beat's and a command's) never open two episodes: the second sees what the first
wrote. States: ok → firing (an episode opens and its channels are notified once) → ok again when the
condition clears (the episode is resolved, and notified so). While it fires, the episode's figures are
brought up to date and nothing is sent. After an episode the monitor waits ``cooldown_minutes`` before
it opens another; while muted, episodes open and close but send nothing.

A delivery is tried by ``deliver`` (a task per delivery): claimed with a conditional update, so a second
copy of the task does nothing, tried at most ``MAX_ATTEMPTS`` times with growing waits; every tick
enqueues the deliveries that are due again (a lost task or a broker that was away delays them only).
"""

import logging
from datetime import datetime, timedelta
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from ctxview.models import AlertEpisode, Delivery, Monitor
from ctxview.monitors import channels, kinds
from ingest.tasks import IDEMPOTENT

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
CLAIM_SECONDS = channels.DEADLINE_SECONDS + 20  # a claimed attempt is tried again after this


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(30 * 2 ** (attempts - 1), 600))


def evaluate(now: datetime | None = None, ids: list[int] | None = None) -> dict[str, int]:
    """One tick: every monitor (or those of ``ids``) evaluated at ``now``; then the due deliveries sent.
    Returns counts: evaluated, opened, resolved."""
    now = now or timezone.now()
    counts = {"evaluated": 0, "opened": 0, "resolved": 0}
    wanted = Monitor.objects.order_by("id")
    if ids:
        wanted = wanted.filter(id__in=ids)
    for monitor_id in wanted.values_list("id", flat=True):
        with transaction.atomic():
            monitor = (
                Monitor.objects.select_for_update(of=("self",))
                .select_related("project")
                .filter(id=monitor_id)
                .first()
            )
            if monitor is None:
                continue
            outcome = evaluate_one(monitor, now)
            counts["evaluated"] += 1
            if outcome:
                counts[outcome] += 1
    send_due(now)
    return counts


def evaluate_one(monitor: Monitor, now: datetime) -> str | None:
    """The monitor's state at ``now`` (its row locked by the caller): 'opened', 'resolved' or None."""
    episode = monitor.episodes.filter(resolved_at=None, test=False).order_by("-started_at").first()
    fields = ["evaluated_at", "state", "seen_cursor", "baseline"]
    monitor.evaluated_at = now
    outcome = None
    if episode is not None:
        verdict = kinds.progress(monitor, episode.cause, now)
        if kinds.first_seen_kind(monitor):
            # More names first seen while it fires join this episode: one alert per episode.
            more = kinds.first_seen(monitor)
            monitor.seen_cursor = more.cursor
            if more.firing:
                names = sorted({*episode.cause.get("names", []), *more.cause["names"]})
                episode.cause = {**episode.cause, "names": names}
                verdict = kinds.progress(monitor, episode.cause, now)
        episode.evidence = verdict.evidence or episode.evidence
        if verdict.firing:
            episode.save(update_fields=["evidence", "cause"])
        else:
            episode.resolved_at = now
            episode.save(update_fields=["evidence", "cause", "resolved_at"])
            monitor.state = Monitor.State.OK
            if not episode.muted:
                _notify(episode, Delivery.State.RESOLVED, now)
            outcome = "resolved"
    else:
        monitor.state = Monitor.State.OK
        last = monitor.episodes.filter(test=False).exclude(resolved_at=None).order_by("-resolved_at").first()
        cooling = last is not None and last.resolved_at + timedelta(minutes=monitor.cooldown_minutes) > now
        if not cooling:
            verdict = kinds.check(monitor, now)
            if verdict.cursor is not None:
                monitor.seen_cursor = verdict.cursor
            if verdict.firing:
                muted = monitor.muted(now)
                episode = AlertEpisode.objects.create(
                    monitor=monitor,
                    started_at=now,
                    cause=verdict.cause,
                    evidence=verdict.evidence,
                    muted=muted,
                )
                if kinds.first_seen_kind(monitor):
                    episode.evidence = kinds.progress(monitor, episode.cause, now).evidence
                    episode.save(update_fields=["evidence"])
                monitor.state = Monitor.State.FIRING
                if not muted:
                    _notify(episode, Delivery.State.FIRING, now)
                outcome = "opened"
    monitor.save(update_fields=fields)
    return outcome


def test_fire(monitor: Monitor, now: datetime | None = None) -> AlertEpisode:
    """A test notification to every channel: an episode of its own, resolved at once, state unchanged."""
    now = now or timezone.now()
    with transaction.atomic():
        episode = AlertEpisode.objects.create(
            monitor=monitor,
            started_at=now,
            resolved_at=now,
            test=True,
            cause={"type": "test", "name": None},
            evidence={"calls": 0, "cost_usd": 0.0},
        )
        _notify(episode, Delivery.State.FIRING, now)
    return episode


def _notify(episode: AlertEpisode, state: str, now: datetime) -> None:
    rows = Delivery.objects.bulk_create(
        [
            Delivery(
                episode=episode,
                channel=index,
                channel_type=channel.get("type", ""),
                state=state,
                next_attempt_at=now,
            )
            for index, channel in enumerate(episode.monitor.channels)
        ],
        ignore_conflicts=True,
    )
    ids = list(
        Delivery.objects.filter(episode=episode, state=state, sent_at=None).values_list("id", flat=True)
    )
    if rows:
        transaction.on_commit(partial(_enqueue_all, ids), robust=True)


def _enqueue_all(ids: list[int]) -> None:
    for delivery_id in ids:
        enqueue(delivery_id)


def enqueue(delivery_id: int, countdown: float | None = None) -> None:
    try:
        deliver_task.apply_async(kwargs={"delivery_id": delivery_id}, countdown=countdown)
    except Exception as exc:  # the broker is away: the next tick sends it
        logger.warning("could not enqueue delivery %s (%s)", delivery_id, exc)


def send_due(now: datetime) -> int:
    """Enqueue the deliveries whose attempt is due (a retry's wait is over, or its task was lost)."""
    due = list(Delivery.objects.filter(next_attempt_at__lte=now).values_list("id", flat=True)[:500])
    for delivery_id in due:
        enqueue(delivery_id)
    return len(due)


def deliver(delivery_id: int, now: datetime | None = None) -> str:
    """Try one delivery once (if it is due and nobody else is trying it); returns what became of it."""
    now = now or timezone.now()
    claimed = Delivery.objects.filter(id=delivery_id, next_attempt_at__lte=now).update(
        next_attempt_at=now + timedelta(seconds=CLAIM_SECONDS)
    )
    if claimed != 1:
        return "not due"
    delivery = Delivery.objects.select_related("episode__monitor__project").get(id=delivery_id)
    episode = delivery.episode
    delivery.attempts += 1
    try:
        channels.send(episode.monitor, delivery.channel, channels.payload(episode, delivery.state))
    except channels.Failed as exc:
        delivery.last_error = str(exc)[:500]
        if delivery.attempts >= MAX_ATTEMPTS:
            delivery.next_attempt_at = None
            result = "given up"
        else:
            delivery.next_attempt_at = now + backoff(delivery.attempts)
            result = "retry"
        logger.warning("delivery %s (%s) failed: %s", delivery.id, delivery.channel_type, exc)
    else:
        delivery.sent_at, delivery.next_attempt_at, delivery.last_error = now, None, ""
        result = "sent"
    delivery.save(update_fields=["attempts", "last_error", "next_attempt_at", "sent_at"])
    if result == "retry" and not settings.CELERY_TASK_ALWAYS_EAGER:
        enqueue(delivery.id, countdown=backoff(delivery.attempts).total_seconds())
    return result


def ticker(seconds: float, stop) -> None:
    """Evaluate every ``seconds`` until ``stop`` (a threading.Event) is set: the embedded mode's beat."""
    from django.db import close_old_connections

    while not stop.wait(seconds):
        try:
            evaluate()
        except Exception:  # a tick that fails is logged; the next one tries again
            logger.exception("monitors: the evaluation tick failed")
        finally:
            close_old_connections()


# The Celery tasks (``ctxview.tasks`` names them for Celery's discovery). They take ids, or nothing, and
# running one twice leaves the same end state.


@shared_task(name="monitors.evaluate", **IDEMPOTENT)
def evaluate_task(*, ids: list[int] | None = None) -> dict[str, int]:
    """One evaluation tick (of every monitor, or of ``ids``); a second tick at once opens nothing twice."""
    return evaluate(ids=ids)


@shared_task(name="monitors.deliver", **IDEMPOTENT)
def deliver_task(*, delivery_id: int) -> str:
    """One attempt of one notification (a copy of the task finds it claimed or sent, and does nothing)."""
    return deliver(delivery_id)
