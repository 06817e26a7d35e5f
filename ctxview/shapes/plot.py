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


def axis(x: list) -> dict:
    """The x values of a trace: ``x0``/``dx`` when they are evenly spaced numbers (a long run's calls),
    else the list itself."""
    if len(x) > 2 and all(isinstance(value, int) for value in x):
        step = x[1] - x[0]
        if step > 0 and all(b - a == step for a, b in zip(x, x[1:], strict=False)):
            return {"x0": x[0], "dx": step}
    return {"x": list(x)}


def links(x: list, urls: list[str]) -> dict:
    """What a click at ``x`` opens, compactly: the urls' common prefix and suffix once, the part that
    varies per point (a call id, a turn) in a list; static/ctxview/plots.js puts them back together."""
    prefix = _common_prefix(urls)
    suffix = _common_prefix([url[len(prefix) :][::-1] for url in urls])[::-1]
    ids = [url[len(prefix) : len(url) - len(suffix)] for url in urls]
    return {**axis(x), "prefix": prefix, "suffix": suffix, "ids": ids}


def _common_prefix(values: list[str]) -> str:
    if not values:
        return ""
    first, last = min(values), max(values)
    length = 0
    while length < min(len(first), len(last)) and first[length] == last[length]:
        length += 1
    return first[:length]


# On a count axis (calls, turns) spanning at most this many, every whole number gets its tick.
EVERY_TICK = 12


def count_axis(values: list, title: str) -> dict:
    """An x axis of calls or turns: whole-number ticks only (never turn 0.5), and no empty band before
    the first value."""
    result: dict = {"title": {"text": title}, "tickformat": ",d"}
    numbers = [value for value in values if isinstance(value, int | float)]
    if numbers:
        low, high = min(numbers), max(numbers)
        result["range"] = [low - 0.5, high + 0.5]
        if high - low <= EVERY_TICK:
            result.update({"tickmode": "linear", "tick0": low, "dtick": 1})
    return result
