"""Fact probes: where something the engineer follows through a run is in a window. No Django.

A probe names an item (by id) or a text. Text is searched in the stored content of the run's items
(casefolded, Unicode-normalised, runs of white space as one); a regular expression is matched by the
caller, which passes the hashes whose content matches (``hits``). Content from traces is untrusted:
it is only ever searched, never interpreted.
"""

import unicodedata
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ctxcore.replay.policies import Slot, is_replayed
from ctxcore.vocabulary import STANDING_KINDS, Item, position_shares

PROBE_KINDS = ("item", "text", "regex")
MAX_PROBE_LENGTH = 500
# Ranked: the best place a probe is found in decides how it is present.
HOW = ("verbatim", "summary", "stub", "unknown", "absent")
PRESENT = {"verbatim": True, "summary": True, "stub": False, "unknown": None, "absent": False}


@dataclass(frozen=True)
class Probe:
    kind: str  # item | text | regex
    value: str

    @property
    def label(self) -> str:
        return self.value


@dataclass(frozen=True)
class Place:
    """Where a probe is in one window."""

    how: str
    item_id: str | None = None
    share: float | None = None  # where the holding item starts, as a share of the window's tokens

    @property
    def present(self) -> bool | None:
        return PRESENT[self.how]

    def to_dict(self) -> dict:
        return {
            "present": self.present,
            "how": self.how,
            "item_id": self.item_id,
            "position_share": round(self.share, 4) if self.share is not None else None,
        }


def normalise(text: str) -> str:
    """Text as it is compared: NFKC, casefolded, white space collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def text_hits(probe: Probe, contents: Mapping[str, str], normalised: bool = False) -> frozenset[str]:
    """The hashes whose content holds a text probe's text (``normalised``: ``contents`` already are)."""
    needle = normalise(probe.value)
    if not needle:
        return frozenset()
    read = (lambda text: text) if normalised else normalise
    return frozenset(key for key, text in contents.items() if needle in read(text))


def standing_probes(items: Iterable[Item]) -> list[Probe]:
    """The run's facts and rules: probes without being asked for (first seen first)."""
    seen: dict[str, None] = {}
    for item in items:
        if item.kind in STANDING_KINDS and not is_replayed(item):
            seen.setdefault(item.id)
    return [Probe("item", item_id) for item_id in seen]


def _how_of(item: Item) -> str:
    if item.mode == "verbatim":
        return "verbatim"
    return "summary" if item.mode in ("summary", "excerpt") else "stub"


def holds(probe: Probe, item: Item, hits: Collection[str] | None) -> bool:
    return item.id == probe.value if probe.kind == "item" else item.hash in hits  # type: ignore[operator]


def how_held(
    probe: Probe, slot: Slot, hits: Collection[str] | None, in_replaced: bool | None = None
) -> str | None:
    """How one slot holds the probe (None: it does not): verbatim, only in a summary or excerpt, only as
    a stub, or unknown (inside a summary nobody has read). ``hits``: see ``locate``; ``in_replaced``:
    whether an item the slot replaced holds it, when the caller knows."""
    if not slot.replaces:
        return _how_of(slot.item) if holds(probe, slot.item, hits) else None
    if in_replaced is None:
        in_replaced = any(holds(probe, item, hits) for item in slot.replaces)
    if in_replaced:
        return ("stub" if slot.item.mode == "reference" else "summary") if slot.known else "unknown"
    return None


def locate(
    probe: Probe, window: Sequence[Slot], hits: Collection[str] | None, with_share: bool = True
) -> Place:
    """Where the probe is in the window: verbatim, only in a summary or excerpt, only as a stub, unknown
    (inside a summary nobody has read, or no content to search), or absent. ``hits``: for a text or
    regex probe, the content hashes holding it (None: no content to search)."""
    if probe.kind != "item" and hits is None:
        return Place("unknown")
    best: tuple[int, Place] | None = None
    shares: list[tuple[float, float]] | None = None
    for index, slot in enumerate(window):
        how = how_held(probe, slot, hits)
        if how is None:
            continue
        rank = HOW.index(how)
        if best is None or rank < best[0]:
            if with_share and shares is None:
                shares = position_shares([entry.item.tokens for entry in window])
            best = (rank, Place(how, slot.item.id, shares[index][0] if shares else None))
            if rank == 0:
                break
    return best[1] if best is not None else Place("absent")
