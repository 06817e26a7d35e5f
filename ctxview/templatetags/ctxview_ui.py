"""Number formatting for the UI's tables: token counts with thousands separators, signed deltas, shares;
links people typed, made safe to put in an href; the template of a finding's evidence."""

import re
from urllib.parse import urlsplit

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from ctxcore import catalogue
from ctxview.shapes import words

register = template.Library()


@register.filter
def counted(number, noun: str) -> str:
    """``{{ n|counted:"break" }}`` -> "1 break", "2 breaks" (``"entry,entries"`` for a plural of its own)."""
    singular, _, plural = noun.partition(",")
    return words.counted(int(number), singular, plural or None)


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
def usd(value, unknown: str = "unknown") -> str:
    """Dollars as every page writes them (``words.money``): 1.4604 -> "$1.46", 0.04586 -> "$0.0459"."""
    return words.money(None if value == "" else value, unknown)


@register.filter
def size(value, unknown: str = "unknown") -> str:
    """A byte count with its unit: 512 -> "512 B", 159275 -> "155.5 kB", 3_500_000 -> "3.3 MB"."""
    if value is None or value == "":
        return unknown
    amount = int(value)
    if amount < 1024:
        return f"{amount:,} B"
    if amount < 1024 * 1024:
        return f"{amount / 1024:,.1f} kB"
    return f"{amount / 1024 / 1024:,.1f} MB"


# Where a path, an id or a model name may wrap: after these characters, never inside a word.
BREAK_AFTER = re.compile(r"([/:._\-@=])")


@register.filter
def breakable(value) -> SafeString:
    """The text escaped, with a line-break opportunity (``<wbr>``) after each / : . _ - @ =."""
    return mark_safe(BREAK_AFTER.sub(r"\1<wbr>", escape(str(value if value is not None else ""))))


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
def http_link(value) -> str:
    """The url when it is an absolute http(s) link, else "" (never a ``javascript:`` or ``data:`` href).

    Labels come from forms that check this, but also from imported exports that may not have; the
    template still escapes what it puts in the attribute.
    """
    url = str(value or "")
    if not url.lower().startswith(("http://", "https://")) or any(ord(char) < 33 for char in url):
        return ""
    try:
        return url if urlsplit(url).netloc else ""
    except ValueError:  # an unbalanced [ in the host
        return ""


@register.filter
def evidence_template(finding_type: str) -> str:
    """The template that shows a finding type's evidence; an empty one for a type this version lacks."""
    entry = catalogue.FINDING_TYPES.get(finding_type)
    return entry.evidence_template if entry else "findings/evidence/_unknown.html"
