"""The ``Panel`` base class: what a run-overview panel is, with working defaults. No Django."""

from collections.abc import Mapping
from typing import Any

from ctxview.shapes import help as help_texts


class Panel:
    """A panel with working defaults (as django-debug-toolbar's): a subclass sets ``slug`` and ``title`` and
    writes ``load`` and ``compute``; its template is ``panels/<slug>.html`` and its help the chart's text."""

    slug: str = ""
    title: str = ""

    @property
    def template(self) -> str:
        return f"panels/{self.slug}.html"

    @property
    def help(self) -> str:
        return help_texts.CHARTS.get(self.slug, "")

    def params(self, query: Mapping[str, str]) -> dict:
        """The panel's query parameters, checked; none by default."""
        return {}

    def load(self, run, params: Mapping[str, Any]) -> Any:
        raise NotImplementedError(f"{type(self).__name__} reads nothing")

    def compute(self, data: Any, params: Mapping[str, Any]) -> dict:
        raise NotImplementedError(f"{type(self).__name__} shapes nothing")

    def summary(self, result: Mapping[str, Any]) -> str:
        """A few words for the badge beside the panel's title once it has loaded; none by default."""
        return ""
