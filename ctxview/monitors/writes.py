"""Creating, changing and deleting a monitor: every check and message, for the API and the page alike
(both pass their input here; ``Refused`` carries the sentence both show)."""

import secrets
from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.core.validators import EmailValidator
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ctxcore.catalogue import CAUSES, FINDING_TYPES
from ctxview import outbound, sealing
from ctxview.access import outbound_off
from ctxview.models import Monitor
from ctxview.monitors.kinds import PARAMS
from ctxview.writes import Refused
from ingest.models import Project

MAX_CHANNELS = 5
SCOPE = ("service", "model", "label", "agent")
FIELDS = ("name", "kind", "params", "scope", "channels", "cooldown_minutes", "muted_until", "mute_minutes")

# The page's starting points: a name, a kind and its parameters.
TEMPLATES = {
    "new-cause": ("New cache-break cause", Monitor.Kind.CACHE_BREAK_CAUSE, {}),
    "hit-rate-drop": ("Cache hit rate drop", Monitor.Kind.HIT_RATE_DROP, {"drop_points": 20, "below": 0.5}),
    "cause-cost": ("Cache breaks cost", Monitor.Kind.CACHE_BREAK_CAUSE, {"cost_usd_above": 5.0}),
    "cost-spike": ("Cost spike", Monitor.Kind.COST_SPIKE, {"times_baseline": 3}),
    "new-finding": ("New finding type", Monitor.Kind.FINDING_TYPE, {}),
    "window-size": ("Window too large", Monitor.Kind.WINDOW_SIZE, {"above_tokens": 150000}),
}


def _text(value, what: str, limit: int, blank: bool = False) -> str:
    if value is None and blank:
        return ""
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise Refused(f"{what} must be {'a' if blank else 'a non-empty'} string")
    value = value.strip()
    if len(value) > limit or any(not c.isprintable() for c in value):
        raise Refused(f"{what} must be at most {limit} printable characters")
    return value


def clean_params(kind: str, params) -> dict:
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise Refused("params must be a JSON object")
    known = PARAMS[kind]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise Refused(f"params of a {kind} monitor are {', '.join(known)}; not {', '.join(unknown)}")
    cleaned = {}
    for name, value in params.items():
        kind_of, _default, low, high = known[name]
        if value is None:
            continue
        if kind_of is str:
            cleaned[name] = _text(value, f"params.{name}", 60)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Refused(f"params.{name} must be a number")
        if kind_of is int and value != int(value):
            raise Refused(f"params.{name} must be a whole number")
        if not low <= value <= high:
            raise Refused(f"params.{name} must be from {low:g} to {high:g}")
        cleaned[name] = kind_of(value)
    if kind == Monitor.Kind.CACHE_BREAK_CAUSE and cleaned.get("cause") and cleaned["cause"] not in CAUSES:
        raise Refused(f"params.cause {cleaned['cause']!r} is no cause of cache breaks ({', '.join(CAUSES)})")
    if kind == Monitor.Kind.FINDING_TYPE and cleaned.get("type") and cleaned["type"] not in FINDING_TYPES:
        raise Refused(f"params.type {cleaned['type']!r} is no finding type")
    if kind == Monitor.Kind.HIT_RATE_DROP and "below" not in cleaned and "drop_points" not in cleaned:
        raise Refused("a hit_rate_drop monitor needs params.below (a rate from 0 to 1) or params.drop_points")
    if kind == Monitor.Kind.COST_SPIKE:
        if not {"above_usd", "times_baseline", "input_tokens_above"} & set(cleaned):
            raise Refused("a cost_spike monitor needs params.above_usd, times_baseline or input_tokens_above")
        if cleaned.get("per", "window") not in ("window", "run"):
            raise Refused("params.per must be 'window' or 'run'")
    if kind == Monitor.Kind.WINDOW_SIZE and not {"above_tokens", "above_percent"} & set(cleaned):
        raise Refused("a window_size monitor needs params.above_tokens or above_percent")
    return cleaned


def clean_channels(project: Project, channels, existing: list[dict]) -> tuple[list[dict], list[str | None]]:
    """The channels to store (secrets sealed), and the secrets made up here (shown once, else None).

    A webhook given again with its URL and no secret keeps the secret it had."""
    if channels is None:
        channels = []
    if not isinstance(channels, list) or len(channels) > MAX_CHANNELS:
        raise Refused(f"channels must be a list of at most {MAX_CHANNELS}")
    stored, made = [], []
    for number, channel in enumerate(channels, 1):
        where = f"channel {number}"
        if not isinstance(channel, dict):
            raise Refused(f"{where} must be a JSON object")
        kind = channel.get("type")
        if kind == "email":
            to = _text(channel.get("to"), f"{where}'s to", 254)
            try:
                EmailValidator()(to)
            except ValidationError:
                raise Refused(f"{where}'s to is not an email address") from None
            stored.append({"type": "email", "to": to})
            made.append(None)
            continue
        if kind not in ("webhook", "slack"):
            raise Refused(f"{where}'s type must be webhook, slack or email")
        off = outbound_off(project)
        if off:
            raise Refused(f"{where}: {off}", 403)
        url = _text(channel.get("url"), f"{where}'s url", 500)
        try:
            outbound.check_url(url)
        except outbound.OutboundRefused as exc:
            raise Refused(f"{where}: {exc}") from None
        if kind == "slack":
            stored.append({"type": "slack", "sealed_url": sealing.seal(url), "hint": _hint(url)})
            made.append(None)
            continue
        secret = channel.get("secret")
        kept = next((c for c in existing if c.get("type") == "webhook" and c.get("url") == url), None)
        if secret is None and kept is not None:
            stored.append(kept)
            made.append(None)
            continue
        if secret is None:
            secret = secrets.token_urlsafe(24)
            made.append(secret)
        else:
            secret = _text(secret, f"{where}'s secret", 200)
            if len(secret) < 8:
                raise Refused(f"{where}'s secret must be at least 8 characters")
            made.append(None)
        stored.append(
            {"type": "webhook", "url": url, "sealed_secret": sealing.seal(secret), "hint": secret[-4:]}
        )
    return stored, made


def _hint(url: str) -> str:
    target = outbound.target_of(url)
    return f"{target.host}/…{url[-4:]}"


def _scope(data) -> dict:
    scope = data.get("scope") or {}
    if not isinstance(scope, dict):
        raise Refused("scope must be a JSON object")
    unknown = sorted(set(scope) - set(SCOPE))
    if unknown:
        raise Refused(f"scope takes {', '.join(SCOPE)}; not {', '.join(unknown)}")
    return {
        name: _text(scope.get(name), f"scope.{name}", 64 if name == "label" else 200, blank=True)
        for name in SCOPE
    }


def _muted_until(data) -> datetime | None:
    if data.get("mute_minutes") is not None:
        minutes = data["mute_minutes"]
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 0 <= minutes <= 525600:
            raise Refused("mute_minutes must be a whole number from 0 to 525600")
        return timezone.now() + timedelta(minutes=minutes) if minutes else None
    value = data.get("muted_until")
    if value is None:
        return None
    moment = parse_datetime(value) if isinstance(value, str) else None
    if moment is None or moment.tzinfo is None:
        raise Refused("muted_until must be an ISO 8601 date-time with its zone, or null")
    return moment


def _cooldown(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10080:
        raise Refused("cooldown_minutes must be a whole number from 0 to 10080")
    return value


def create_monitor(project: Project, user, data: dict) -> tuple[Monitor, list[str | None]]:
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise Refused(f"a monitor has {', '.join(FIELDS)}; not {', '.join(unknown)}")
    name = _text(data.get("name"), "name", 100)
    kind = data.get("kind")
    if kind not in Monitor.Kind.values:
        raise Refused(f"kind must be one of {', '.join(Monitor.Kind.values)}")
    params = clean_params(kind, data.get("params"))
    channels, made = clean_channels(project, data.get("channels"), [])
    with transaction.atomic():
        if Monitor.objects.filter(project=project, name=name).exists():
            raise Refused(f"this project has a monitor named {name!r} already", 409)
        monitor = Monitor.objects.create(
            project=project,
            name=name,
            kind=kind,
            params=params,
            channels=channels,
            cooldown_minutes=_cooldown(data.get("cooldown_minutes", 10)),
            muted_until=_muted_until(data),
            created_by=user if getattr(user, "is_authenticated", False) else None,
            # What was first seen before the monitor existed is not news to it.
            seen_cursor=_latest_sighting(project),
            **_scope(data),
        )
    return monitor, made


def _latest_sighting(project: Project) -> int:
    from ingest.rollups import FirstSeen

    return FirstSeen.objects.filter(project=project).order_by("-id").values_list("id", flat=True).first() or 0


def update_monitor(monitor: Monitor, data: dict) -> list[str | None]:
    unknown = sorted(set(data) - set(FIELDS) - {"kind"})
    if unknown:
        raise Refused(f"a monitor has {', '.join(FIELDS)}; not {', '.join(unknown)}")
    if "kind" in data and data["kind"] != monitor.kind:
        raise Refused("a monitor's kind cannot change: create another monitor")
    made: list[str | None] = []
    if "name" in data:
        name = _text(data["name"], "name", 100)
        if Monitor.objects.filter(project=monitor.project, name=name).exclude(id=monitor.id).exists():
            raise Refused(f"this project has a monitor named {name!r} already", 409)
        monitor.name = name
    if "params" in data:
        monitor.params = clean_params(monitor.kind, data["params"])
    if "scope" in data:
        for name, value in _scope(data).items():
            setattr(monitor, name, value)
    if "channels" in data:
        monitor.channels, made = clean_channels(monitor.project, data["channels"], monitor.channels)
    if "cooldown_minutes" in data:
        monitor.cooldown_minutes = _cooldown(data["cooldown_minutes"])
    if "muted_until" in data or "mute_minutes" in data:
        monitor.muted_until = _muted_until(data)
    monitor.save()
    return made
