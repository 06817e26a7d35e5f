"""Number formatting for the UI's tables: token counts with thousands separators, shares, dollars."""

from django import template

register = template.Library()


@register.filter
def tokens(value, unknown: str = "unknown") -> str:
    """12014 -> "12,014"; None -> "unknown" (a figure the source did not report is never 0)."""
    if value is None or value == "":
        return unknown
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def signed(value) -> str:
    """A delta with its sign: +880, -3, 0."""
    if value is None:
        return ""
    return f"{int(value):+,}" if value else "0"


@register.filter
def pct(value, digits: int = 0) -> str:
    """0.4213 -> "42 %" (a share of 1); None -> ""."""
    if value is None or value == "":
        return ""
    return f"{float(value) * 100:.{int(digits)}f} %"


@register.filter
def usd(value) -> str:
    """Dollars: 4 decimals below $1, 2 above; None -> "unknown"."""
    if value is None:
        return "unknown"
    value = float(value)
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:,.4f}"
