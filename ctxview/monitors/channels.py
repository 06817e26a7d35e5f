"""Where an episode's notifications go, and what they say: a generic webhook (JSON, signed), a Slack-style
incoming webhook (text and blocks) and email (Django's email settings).

The webhook's body is documented in the README ("Monitors and alerts"); its ``X-Ctxview-Signature`` is
``sha256=`` and the hex HMAC-SHA256 of the body under the channel's secret. Webhooks and Slack leave
through ``ctxview.outbound`` (public addresses only unless the operator allows more, no redirects, a
deadline) and, like re-ask, only for a project an instance admin let call out (``access.outbound_off``);
email goes to the operator's mail server and needs no such leave.
"""

import hashlib
import hmac
import json
import time

from django.conf import settings
from django.core.mail import send_mail
from django.urls import reverse

from ctxview import outbound, sealing
from ctxview.access import outbound_off
from ctxview.models import AlertEpisode, Monitor
from ingest.models import Call

TYPES = ("webhook", "slack", "email")
DEADLINE_SECONDS = 10
MAX_ANSWER_BYTES = 64 * 1024
SIGNATURE = "X-Ctxview-Signature"


class Failed(Exception):
    """A notification that did not go out; the message says why (kept as the delivery's last error)."""


def public_url(path: str) -> str:
    return settings.CTXVIEW_PUBLIC_URL.rstrip("/") + path


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def payload(episode: AlertEpisode, state: str) -> dict:
    """The webhook's body (and what the other channels say, in words)."""
    monitor = episode.monitor
    cause, evidence = episode.cause, episode.evidence
    run_id, seq = cause.get("run"), cause.get("seq")
    call_id = (
        Call.objects.filter(run_id=run_id, seq=seq).values_list("id", flat=True).first()
        if run_id and seq
        else None
    )
    item = (
        {"id": cause.get("item"), "kind": cause.get("item_kind"), "bytes": cause.get("bytes")}
        if cause.get("item")
        else None
    )
    body = {
        "monitor": {
            "id": monitor.id,
            "name": monitor.name,
            "kind": monitor.kind,
            "url": public_url(reverse("cv-monitors", args=[monitor.project.slug])),
        },
        "state": state,
        "test": episode.test,
        "project": monitor.project.slug,
        "episode": {
            "id": episode.id,
            "started_at": episode.started_at.isoformat(),
            "resolved_at": episode.resolved_at.isoformat() if episode.resolved_at else None,
        },
        "run": {"id": run_id, "url": public_url(reverse("cv-run", args=[run_id]))} if run_id else None,
        "call": (
            {"seq": seq, "url": public_url(reverse("cv-call", args=[call_id])) if call_id else None}
            if seq
            else None
        ),
        "cause": cause.get("name") if cause.get("type") in ("cause", "finding") else None,
        "causes": cause.get("names") or ([cause["name"]] if cause.get("name") else []),
        "item": item,
        "calls": evidence.get("calls"),
        "tokens": evidence.get("tokens", evidence.get("billed_input")),
        "cost_usd": evidence.get("cost_usd"),
        "evidence": evidence,
    }
    body["summary"] = summary(body)
    return body


def summary(body: dict) -> str:
    """One line, for Slack's text, an email's subject and the webhook's ``summary``."""
    head = f"[{body['state']}] {body['monitor']['name']} ({body['project']})"
    if body["test"]:
        return f"{head}: a test notification"
    parts = []
    if body["cause"]:
        parts.append(f"{body['cause']}")
    if body["item"]:
        parts.append(
            f"item {body['item']['id']}" + (f" ({body['item']['kind']})" if body["item"]["kind"] else "")
        )
    if body["run"]:
        parts.append(
            f"first at run {body['run']['id']}" + (f" call {body['call']['seq']}" if body["call"] else "")
        )
    if body["calls"] is not None:
        parts.append(f"{body['calls']} calls since")
    if body["tokens"]:
        parts.append(f"{body['tokens']:,} tokens")
    if body["cost_usd"] is not None:
        parts.append(f"${body['cost_usd']:.4f} so far")
    return f"{head}: " + ", ".join(parts) if parts else head


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(body: dict) -> dict:
    text = _slack_escape(body["summary"])
    links = [f"<{body['monitor']['url']}|monitor>"]
    if body["run"]:
        links.append(f"<{body['run']['url']}|run {body['run']['id']}>")
    if body["call"] and body["call"]["url"]:
        links.append(f"<{body['call']['url']}|call {body['call']['seq']}>")
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    changed = (body["item"] or {}).get("bytes")
    if changed:
        diff = _slack_escape(f"- {changed.get('old', '')}\n+ {changed.get('new', '')}")[:2500]
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{diff}```"}})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": " · ".join(links)}]})
    return {"text": text, "blocks": blocks}


def email_text(body: dict) -> str:
    lines = [body["summary"], ""]
    if body["item"]:
        lines.append(f"Item: {body['item']['id']} ({body['item']['kind'] or 'unknown kind'})")
        changed = body["item"].get("bytes")
        if changed:
            lines += [f"  was: {changed.get('old', '')!r}", f"  now: {changed.get('new', '')!r}"]
    if body["run"]:
        lines.append(f"Run: {body['run']['url']}")
    if body["call"] and body["call"]["url"]:
        lines.append(f"Call {body['call']['seq']}: {body['call']['url']}")
    lines.append(f"Monitor: {body['monitor']['url']}")
    return "\n".join(lines) + "\n"


def send(monitor: Monitor, index: int, body: dict) -> None:
    """Send ``body`` to the monitor's channel ``index``; Failed says why it did not go."""
    try:
        channel = monitor.channels[index]
    except IndexError:
        raise Failed("the channel was removed from the monitor") from None
    kind = channel.get("type")
    if kind == "email":
        try:
            send_mail(body["summary"][:200], email_text(body), None, [channel["to"]], fail_silently=False)
        except Exception as exc:  # SMTP and socket errors of every kind
            raise Failed(f"the mail server refused it: {exc}"[:500]) from None
        return
    off = outbound_off(monitor.project)
    if off:
        raise Failed(off)
    try:
        if kind == "webhook":
            url = channel["url"]
            data = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
            headers = {"Content-Type": "application/json", "User-Agent": "ctxview-monitors"}
            headers[SIGNATURE] = sign(data, sealing.unseal(channel["sealed_secret"]))
        elif kind == "slack":
            url = sealing.unseal(channel["sealed_url"])
            data = json.dumps(slack_message(body)).encode()
            headers = {"Content-Type": "application/json", "User-Agent": "ctxview-monitors"}
        else:
            raise Failed(f"unknown channel type {kind!r}")
        outbound.post(
            url, headers, data, deadline=time.monotonic() + DEADLINE_SECONDS, max_bytes=MAX_ANSWER_BYTES
        )
    except sealing.Unreadable:
        raise Failed("the channel's secret was sealed under another key: set the channel again") from None
    except outbound.OutboundRefused as exc:
        raise Failed(str(exc)[:500]) from None
