"""Shared pieces of the plotly figures: layout, config, and text made safe for plotly's pseudo-HTML."""

FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif'


def plot_text(value: object) -> str:
    """Text for a plotly label or hover: plotly renders a subset of HTML in strings, so escape it.

    Trace data (item ids, reasons, tool names) is untrusted; plotly decodes these entities back to the
    characters when it draws, so the text reads as sent and never becomes markup.
    """
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def base_layout() -> dict:
    return {
        "font": {"family": FONT, "size": 12, "color": "#1d2330"},
        "margin": {"l": 60, "r": 60, "t": 24, "b": 44},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": -0.22, "x": 0, "font": {"size": 11}},
        "height": 340,
    }


def config() -> dict:
    return {
        "displaylogo": False,
        "responsive": True,
        "modeBarButtonsToRemove": ["lasso2d", "select2d", "toImage"],
    }
