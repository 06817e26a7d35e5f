"""What every UI view shares: render a page or only the region htmx asked for, a 400 that says why, and the
notes card of the call and item pages. The UI views import this module, never one another."""

from collections.abc import Iterable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ctxview.access import role_at_least, role_of
from ctxview.models import Bookmark, NoteRevision
from ctxview.params import BadParameter
from ingest.models import Call, Membership, Run


def region(request: HttpRequest, regions: Iterable[str] = ("page",)) -> str | None:
    """The partial to render: the id of the element htmx targets, when the page defines that region.

    Boosted navigation targets ``#page`` (the whole main area); filters, pagers and tabs target their
    own region. A history-restore request wants the whole document.
    """
    htmx = getattr(request, "htmx", None)
    if not htmx or htmx.history_restore_request:
        return None
    return htmx.target if htmx.target in regions else None


def render_page(
    request: HttpRequest,
    template: str,
    context: dict,
    regions: Iterable[str] = ("page",),
    status: int = 200,
) -> HttpResponse:
    """The full page, or the ``{% partialdef %}`` htmx targets (``template#region``)."""
    name = region(request, regions)
    return render(request, f"{template}#{name}" if name else template, context, status=status)


def bad_request(request: HttpRequest, message: str, status: int = 400) -> HttpResponse:
    """A 400 (or ``status``) whose page (or fragment, for htmx) says what was wrong with the request."""
    htmx = getattr(request, "htmx", None)
    template = "ctxview/error.html"
    if htmx and not htmx.history_restore_request:
        template += "#page" if htmx.target == "page" else "#message"
    context = {"title": "Bad request" if status == 400 else "Refused", "message": message, "status": status}
    return render(request, template, context, status=status)


def ui_view(view):
    """GET, logged in, varies on the htmx headers; a ``BadParameter`` becomes a 400 with its message."""

    @require_GET
    @login_required
    @vary_on_headers("HX-Request", "HX-Target")
    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except BadParameter as exc:
            return bad_request(request, str(exc))

    return wrapper


def notes_with_history(notes, user, role: str | None):
    """Notes with their earlier texts (oldest first) and whether ``user`` may edit or delete each."""
    revisions = NoteRevision.objects.select_related("editor").order_by("edited_at", "id")
    notes = list(
        notes.select_related("author", "call")
        .prefetch_related(Prefetch("revisions", queryset=revisions))
        .order_by("created_at", "id")
    )
    can_edit = role_at_least(role, Membership.Role.EDITOR)
    is_admin = role_at_least(role, Membership.Role.ADMIN)
    for note in notes:
        # The rule writes.check_may_change_note applies: the note's author or an admin.
        note.may_change = can_edit and (is_admin or note.author_id == user.id)
    return notes


def notes_region(user, run: Run, *, call: Call | None = None, item_id: str = "", error: str = "") -> dict:
    """What the notes card of a call page (its notes and bookmark) or an item page (its notes) shows.

    ``back`` are the hidden fields each of its forms sends, so the write comes back to this page."""
    role = role_of(user, run.project)
    if call is not None:
        notes = run.review_notes.filter(call=call)
        back = [("back", "call"), ("call_seq", call.seq)]
    else:
        notes = run.review_notes.filter(item_id=item_id)
        back = [("back", "item"), ("item_id", item_id)]
    bookmark = (
        Bookmark.objects.filter(call=call).select_related("created_by").first() if call is not None else None
    )
    return {
        "run": run,
        "notes_on": {
            "call": call,
            "item_id": item_id,
            "notes": notes_with_history(notes, user, role),
            "bookmark": bookmark,
            "can_edit": role_at_least(role, Membership.Role.EDITOR),
            "back": back,
            "error": error,
        },
    }
