"""What every UI view shares: render a page or only the region htmx asked for, and a 400 that says why."""

from collections.abc import Iterable
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ctxview.params import BadParameter


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


def bad_request(request: HttpRequest, message: str) -> HttpResponse:
    """A 400 whose page (or fragment, for htmx) says what was wrong with the request."""
    htmx = getattr(request, "htmx", None)
    template = "ctxview/error.html"
    if htmx and not htmx.history_restore_request:
        template += "#page" if htmx.target == "page" else "#message"
    context = {"title": "Bad request", "message": message, "status": 400}
    return render(request, template, context, status=400)


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
