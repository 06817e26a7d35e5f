"""A run's title: what a person knows the run by, shown beside its key (issue 36).

The title is the first user message of the run's first call, on one line and shortened. Where the
calls carry no messages, a coding CLI's session takes the first prompt the CLI logged for it. Any
other run takes the name of the root span of its first call's trace. A CLI's root spans are named
the same in every session, so a CLI run gets no title from them.

It is stored on the run (``Run.title``) and made again whenever the run's first call changes. That
happens when the first call is numbered (``numbering.remember``: calls that arrive out of order
renumber the run from the earliest, so the earliest call gives the title whatever the order), when
the root span of its trace arrives after it (``calls.retitle``), and when a CLI's prompt arrives
(``session_calls``).

The content is untrusted: the pages escape it like any other text from a trace. It follows the
project's policy. A hash-only project's runs get no title from content, only from a span's name.
Redaction masked the content before it was stored, so a title shows it masked.
"""

import itertools
import json

from django.db.models import Q

from ingest.families import SESSION_FAMILIES, Family
from ingest.models import Call, Content, LogRecord, Run, Span
from ingest.redact import only_masks

LIMIT = 80  # characters of a title, the ellipsis included
# What is read to find the text: the first user messages of the call (a message that has only images
# gives none), and the start of each (a long message is cut, and its rendered form then fails to
# parse: its text is read from the cut form).
MESSAGES = 8
TEXT_CHARS = 4096
PROMPTS = 8
_TEXT_PART = '{"type":"text","content":"'  # how ctxcore's render writes a text part of a message


def shorten(text: str, limit: int = LIMIT) -> str:
    """``text`` as one line of at most ``limit`` characters, ending in an ellipsis when it was cut.
    Runs of whitespace become one space, and control and format characters are dropped: a title
    cannot break a line or turn the text around it right to left."""
    line = " ".join("".join(char for char in text if char.isprintable() or char.isspace()).split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    if space >= limit * 2 // 3:  # end at a word where one ends near the limit
        cut = cut[:space]
    return cut.rstrip() + "…"


def message_text(content: str) -> str:
    """The text of a user message item's content: the text parts of a message as ingest renders it
    (``{"role": …, "parts": […]}``, possibly cut), or the content itself (a sender's manifest item)."""
    if not content.startswith('{"role"'):
        return content
    try:
        message = json.loads(content)
    except ValueError:  # cut: the start of its first text part
        return _first_text_part(content)
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return content
    return " ".join(
        part["content"]
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str)
    )


def _first_text_part(content: str) -> str:
    start = content.find(_TEXT_PART)
    if start < 0:
        return ""
    body = content[start + len(_TEXT_PART) :]
    end, escaped = len(body), False
    for index, char in enumerate(body):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            end = index
            break
    body = body[:end]
    for trim in range(7):  # a cut may end inside an escape (\uXXXX is six characters)
        try:
            return json.loads(f'"{body[: len(body) - trim]}"')
        except ValueError:
            continue
    return ""


def title_of(run: Run, first: Call) -> str:
    """The title of ``run`` whose first call is ``first`` (numbered or being numbered)."""
    family = _session_family(first)
    if not run.project.hash_only:
        texts = _user_texts(run.project_id, first)
        if family is not None:
            texts = itertools.chain(texts, _prompts(run, family))
        for text in texts:
            if not only_masks(text) and (title := shorten(text)):
                return title
    if family is not None:
        return ""
    return shorten(_root_name(run.project_id, first))


def retitle(run: Run) -> bool:
    """Make the title of ``run`` (locked by the caller) again from its first call; whether it changed
    (the caller writes it)."""
    first = run.calls.filter(seq=1).only("id", "run", "trace_id", "parent_span_id", "name").first()
    title = title_of(run, first) if first is not None else run.title
    changed = title != run.title
    run.title = title
    return changed


def _session_family(call: Call) -> Family | None:
    """The coding CLI whose session assembled this call, if one did."""
    for family in SESSION_FAMILIES:
        if call.name in family.sessions.call_names:
            return family
    return None


def _user_texts(project_id: int, call: Call):
    """The texts of the call's first user messages, in order (tool results are items of another kind)."""
    if call.made_items is not None:  # made by this batch: the items still hold their content
        for item in [item for item in call.made_items if item.kind == "message" and item.role == "user"][
            :MESSAGES
        ]:
            if item.content is not None:
                yield message_text(item.content)
        return
    if call.pk is None:
        items = call.items
    else:
        # Its own item list only: a call read for numbering is in a chunk of 200, whose lists ``items``
        # would all load.
        items = Call.objects.only("id", "item_list").get(pk=call.pk).items
    hashes = [item["hash"] for item in items if item.get("kind") == "message" and item.get("role") == "user"]
    texts = dict(Content.objects.by_hash(project_id, hashes[:MESSAGES], "text", chars=TEXT_CHARS))
    for content_hash in hashes[:MESSAGES]:
        if content_hash in texts:
            yield message_text(texts[content_hash])


def _prompts(run: Run, family: Family):
    """The first prompts the CLI logged in the run's session, in order (a withheld one is skipped)."""
    spec = family.sessions
    if not spec.prompt_event:
        return
    logged = (
        LogRecord.objects.filter(
            Q(**{f"attributes__{spec.log_key}": run.key}),
            Q(**{"attributes__event.name": spec.prompt_event}),
            project_id=run.project_id,
        )
        .order_by("time_unix_nano", "observed_time_unix_nano", "id")
        .values_list(f"attributes__{spec.prompt_key}", flat=True)[:PROMPTS]
    )
    for prompt in logged:
        if isinstance(prompt, str) and prompt not in spec.prompt_withheld:
            yield prompt


def _root_name(project_id: int, call: Call) -> str:
    """The name of the root span of the call's trace: the call's own when it has no parent."""
    if not call.parent_span_id:
        return call.name
    name = (
        Span.objects.filter(project_id=project_id, trace_id=call.trace_id, parent_span_id="")
        .order_by("start_time_unix_nano", "span_id")
        .values_list("name", flat=True)
        .first()
    )
    return name or ""
