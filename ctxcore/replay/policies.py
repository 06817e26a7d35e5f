"""Context policies: which of a run's items a call's window would hold under another rule. No Django.

A policy is a spec string of steps joined by ``+`` (``user_verbatim:4+elide:2``): the first step starts
from the run's whole item pool in render order (``full``), or from what the call really held
(``recorded``), and each step maps a window to a window. Only the window changes, never the items: a
stub or a summary is a new item standing for the ones it replaced. One small function per policy.

Items of the system prompt, the tool catalogue and memory ("the head") stay unless a policy says
otherwise; the rest is the history a policy chooses from.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import chain

from ctxcore.analysis import prefix
from ctxcore.vocabulary import STANDING_KINDS, Item, digest

HEAD_BUCKETS = ("system", "tools", "memory")
STUB_TOKENS = 12  # "[tool result elided: 1,840 tokens]" and its framing
DEFAULT_SUMMARY_TOKENS = 1000
MAX_ARGUMENT = 100_000
# A source no sender uses: marks the items a replay made (stubs and summaries).
REPLAY_SOURCE = "ctxview.replay"


class BadPolicy(ValueError):
    """A spec string that names no policy or gives it wrong arguments; the message says which."""


@dataclass(frozen=True)
class Slot:
    """One place in a replayed window: an item, and for a stub or a summary the items it replaced."""

    item: Item
    replaces: tuple[Item, ...] = ()
    # Whether it is known what the slot keeps of ``replaces``: a stub keeps a pointer; a summary a
    # model would have written keeps something no replay can know without asking the model.
    known: bool = True
    fold: str = ""  # a summary: the chained hash of the items it replaced (``prefix.chain``)


@dataclass(frozen=True)
class Moment:
    """What a policy knows at one call: its turn, each item's turn, and what the call really held."""

    turn: int
    turn_of: Mapping[str, int]
    recorded: tuple[Item, ...] = ()

    def item_turn(self, item: Item) -> int:
        return self.turn_of.get(item.id, self.turn)


def is_history(item: Item) -> bool:
    """Conversation, tool results, retrieved content...: what sliding and trimming policies choose from."""
    return item.bucket not in HEAD_BUCKETS


def is_user_message(item: Item) -> bool:
    """A message the user wrote (a tool result sent in a user turn is not one)."""
    return item.role == "user" and item.bucket == "conversation" and item.kind != "tool_result"


def is_tool_result(item: Item) -> bool:
    return item.kind == "tool_result" or item.bucket == "tool_results"


def is_pinned(item: Item) -> bool:
    """What ``pin_end`` moves: pinned items, facts and rules."""
    return item.pinned or item.kind in STANDING_KINDS


Window = list[Slot]


# --- The policies, one function each ------------------------------------------------------------


def full(window: Window, moment: Moment) -> Window:
    """Every item the run has held so far, none excluded (latest version of each)."""
    return list(window)


def recorded(window: Window, moment: Moment) -> Window:
    """What the call really held."""
    return [Slot(item) for item in moment.recorded]


def sliding_window(window: Window, moment: Moment, messages: int) -> Window:
    """The last ``messages`` history items; the head stays."""
    history = [index for index, slot in enumerate(window) if is_history(slot.item)]
    dropped = set(history[: max(0, len(history) - messages)])
    return [slot for index, slot in enumerate(window) if index not in dropped]


def last_turns(window: Window, moment: Moment, turns: int) -> Window:
    """The history of the last ``turns`` turns (the current one included); the head stays."""
    first = moment.turn - turns + 1
    return [slot for slot in window if not is_history(slot.item) or moment.item_turn(slot.item) >= first]


def user_verbatim(window: Window, moment: Moment, turns: int) -> Window:
    """Every user message verbatim, plus the whole history of the last ``turns`` turns."""
    first = moment.turn - turns + 1
    return [
        slot
        for slot in window
        if not is_history(slot.item) or is_user_message(slot.item) or moment.item_turn(slot.item) >= first
    ]


def elide(window: Window, moment: Moment, turns: int) -> Window:
    """Tool results older than ``turns`` turns replaced by a stub of a few tokens."""
    first = moment.turn - turns + 1
    return [
        _stub(slot)
        if is_tool_result(slot.item) and not slot.replaces and moment.item_turn(slot.item) < first
        else slot
        for slot in window
    ]


def pin_end(window: Window, moment: Moment) -> Window:
    """Pinned items, facts and rules moved to the end of the window, in their order."""
    pinned = [is_pinned(slot.item) for slot in window]
    return [slot for slot, moved in zip(window, pinned, strict=True) if not moved] + [
        slot for slot, moved in zip(window, pinned, strict=True) if moved
    ]


def compaction(window: Window, moment: Moment, every: int, tokens: int = DEFAULT_SUMMARY_TOKENS) -> Window:
    """Every ``every`` turns, the history before is replaced by one summary of ``tokens`` tokens."""
    upto = (moment.turn - 1) // every * every
    old = [
        index
        for index, slot in enumerate(window)
        if is_history(slot.item) and moment.item_turn(slot.item) <= upto
    ]
    if not old:
        return list(window)
    parts = [window[index].replaces or (window[index].item,) for index in old]
    replaced = tuple(chain.from_iterable(parts))
    # The summary's identity: a chained hash of what it replaced, continued from the summary before
    # when that one comes first (the same value either way; a replay folds each item in only once).
    first = window[old[0]]
    start, rest = (first.fold, parts[1:]) if first.fold else ("", parts)
    links = prefix.chain([item.hash for item in chain.from_iterable(rest)], start)
    fold = links[-1] if links else start
    text = f"[summary of turns 1-{upto}, {tokens} tokens]"
    summary = Slot(
        Item(
            id=f"replay:summary:1-{upto}",
            kind="summary",
            bucket="summary",
            hash=digest(f"{text}|{fold}"),
            position=0,
            role="user",
            tokens=tokens,
            mode="summary",
            source=REPLAY_SOURCE,
            origin_turn=upto,
            content=text,
        ),
        replaces=replaced,
        known=False,
        fold=fold,
    )
    gone = set(old)
    before = [slot for index, slot in enumerate(window[: old[0]]) if index not in gone]
    after = [slot for index, slot in enumerate(window) if index > old[0] and index not in gone]
    return [*before, summary, *after]


def turns(window: Window, moment: Moment, first: int, last: int) -> Window:
    """A sub-agent given only the history of turns ``first`` to ``last``."""
    return [
        slot for slot in window if not is_history(slot.item) or first <= moment.item_turn(slot.item) <= last
    ]


@lru_cache(maxsize=65_536)  # the same old results are stubbed again on every later call
def _stub(slot: Slot) -> Slot:
    item = slot.item
    text = f"[{item.kind} {item.id} elided: {item.tokens or 0} tokens]"
    stub = replace(
        item,
        hash=digest(text),
        tokens=STUB_TOKENS,
        tokens_estimated=True,
        mode="reference",
        source=REPLAY_SOURCE,
        content=text,
        content_truncated=False,
    )
    return Slot(stub, replaces=(item,))


# --- Spec strings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    name: str
    function: Callable[..., Window]
    arguments: tuple[int, ...] = ()

    def __call__(self, window: Window, moment: Moment) -> Window:
        return self.function(window, moment, *self.arguments)


@dataclass(frozen=True)
class Policy:
    """A parsed spec: its canonical string and its steps."""

    spec: str
    steps: tuple[Step, ...] = field(default_factory=tuple)

    def window(self, pool: Window, moment: Moment) -> Window:
        """The window this policy gives a call, from the run's pool at that call."""
        window = pool
        for step in self.steps:
            window = step(window, moment)
        return window


# name -> (function, required argument names, optional argument names with defaults)
POLICIES: dict[str, tuple[Callable[..., Window], tuple[str, ...], tuple[tuple[str, int], ...]]] = {
    "recorded": (recorded, (), ()),
    "full": (full, (), ()),
    "sliding_window": (sliding_window, ("N",), ()),
    "last_turns": (last_turns, ("K",), ()),
    "user_verbatim": (user_verbatim, ("K",), ()),
    "elide": (elide, ("K",), ()),
    "pin_end": (pin_end, (), ()),
    "compaction": (compaction, ("M",), (("S", DEFAULT_SUMMARY_TOKENS),)),
    "turns": (turns, ("A-B",), ()),
}
DEFAULT_POLICIES = ("recorded", "full", "sliding_window:12", "user_verbatim:4", "elide:4", "pin_end")
_NUMBER = re.compile(r"^[0-9]{1,6}$")
_RANGE = re.compile(r"^([0-9]{1,6})-([0-9]{1,6})$")


def _number(text: str, name: str, step: str, minimum: int = 1) -> int:
    if not _NUMBER.match(text) or not minimum <= int(text) <= MAX_ARGUMENT:
        raise BadPolicy(f"{step}: {name} must be a whole number from {minimum} to {MAX_ARGUMENT}")
    return int(text)


def _step(text: str) -> Step:
    name, *arguments = text.split(":")
    if name not in POLICIES:
        raise BadPolicy(f"unknown policy {name[:40]!r}; known: {', '.join(POLICIES)}")
    function, required, optional = POLICIES[name]
    usage = ":".join([name, *required, *(f"[{option}]" for option, _ in optional)])
    if not len(required) <= len(arguments) <= len(required) + len(optional):
        raise BadPolicy(f"{name} is written {usage}")
    if name == "turns":
        match = _RANGE.match(arguments[0])
        if not match or not 1 <= int(match[1]) <= int(match[2]) <= MAX_ARGUMENT:
            raise BadPolicy("turns is written turns:A-B with 1 <= A <= B")
        return Step(name, function, (int(match[1]), int(match[2])))
    names = [*required, *(option for option, _ in optional)]
    values = tuple(_number(value, label, name) for value, label in zip(arguments, names, strict=False))
    return Step(name, function, values)


def parse(spec: str) -> Policy:
    """A policy from its spec string (``sliding_window:12``, ``user_verbatim:4+elide:2``)."""
    text = spec.strip()
    if not text:
        raise BadPolicy("a policy spec is empty")
    if len(text) > 200:
        raise BadPolicy("a policy spec is longer than 200 characters")
    steps = tuple(_step(part.strip()) for part in text.split("+"))
    if any(step.name in ("recorded", "full") for step in steps[1:]):
        raise BadPolicy("recorded and full can only start a policy")
    canonical = "+".join(
        step.name + "".join(f":{value}" for value in step.arguments)
        if step.name != "turns"
        else f"turns:{step.arguments[0]}-{step.arguments[1]}"
        for step in steps
    )
    return Policy(canonical, steps)


def parse_list(specs: str, limit: int = 12) -> list[Policy]:
    """Comma-separated specs, each once, in the order given."""
    policies: list[Policy] = []
    for part in specs.split(","):
        policy = parse(part)
        if policy.spec not in [known.spec for known in policies]:
            policies.append(policy)
    if len(policies) > limit:
        raise BadPolicy(f"at most {limit} policies at a time")
    return policies


def is_replayed(item: Item) -> bool:
    """Whether an item is one a replay made (a stub or a summary), not one the run held."""
    return item.source == REPLAY_SOURCE
