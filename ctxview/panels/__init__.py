"""The run overview's panels: one module per panel, each a small class, listed in ``RUN_PANELS``.

A panel reads what it needs (``load``: the only part that touches the database, through
``ctxview.panels.load``), shapes it with pure functions (``compute``: plain data in, plain data out, no
Django), and may draw it (``figure``: a plotly figure as a plain dict, which the template embeds with
``json_script`` and static/ctxview/plots.js draws after each htmx swap). ``params`` validates the
query string once (with ``ctxview.params``) and raises ``BadParameter`` with the sentence the 400 shows.
"""

import functools
from collections.abc import Mapping
from typing import Any, Protocol


class Panel(Protocol):
    slug: str
    title: str
    template: str

    def params(self, query: Mapping[str, str]) -> dict: ...

    def load(self, run, params: Mapping[str, Any]) -> Any: ...

    def compute(self, data: Any, params: Mapping[str, Any]) -> dict: ...

    def summary(self, result: Mapping[str, Any]) -> str: ...


@functools.cache
def run_panels() -> dict[str, Panel]:
    """The run overview's panels by slug, in the order the page shows them."""
    from ctxview.panels import agents, cache, calls, composition, findings, presence

    panels: list[Panel] = [
        composition.CompositionPanel(),
        agents.AgentsPanel(),
        cache.CachePanel(),
        findings.FindingsPanel(),
        presence.PresencePanel(),
        calls.CallsPanel(),
    ]
    return {panel.slug: panel for panel in panels}
