"""The run overview's panels: one module per panel, each a small ``Panel`` subclass (``base.py``), listed
in ``run_panels``.

A panel reads what it needs (``load``: the only part that touches the database, through
``ctxview.queries``), shapes it with pure functions (``compute``: plain data in, plain data out, no
Django), and may draw it (a plotly figure as a plain dict in the result, which the template embeds with
``json_script`` and static/ctxview/plots.js draws after each htmx swap). ``params`` validates the
query string once and raises ``ctxview.params.BadParameter`` with the sentence the 400 shows. Shaping
code that is no panel (the call, explain, compare and item pages, help texts, colours) is in
``ctxview.shapes``.
"""

import functools

from ctxview.panels.base import Panel


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
