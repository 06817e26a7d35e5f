"""Counts and money in words: "1 break", "2 breaks", "12,014 tokens" (never "1 breaks" or "break(s)"), and
one money format for every page. No Django."""

# Plurals that are not the singular plus "s".
_IRREGULAR = {"policy": "policies", "entry": "entries", "match": "matches", "batch": "batches"}


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """``number`` with thousands separators and the noun in the form that number takes."""
    noun = singular if number == 1 else plural or _IRREGULAR.get(singular, singular + "s")
    return f"{number:,} {noun}"


def money(value: float | None, unknown: str = "unknown") -> str:
    """Dollars, the same figure written the same way everywhere: "$1.46" from a dollar up, "$0.0459"
    below it (cents would round most calls to $0.00), "-$0.1000" for a saving lost; None: unknown."""
    if value is None:
        return unknown
    amount = float(value)
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    return f"{sign}${amount:,.2f}" if amount >= 1 or amount == 0 else f"{sign}${amount:,.4f}"
