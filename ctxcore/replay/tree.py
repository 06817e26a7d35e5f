"""Every window a policy gives, kept as paths in one prefix tree. No Django.

A window is the path from the root to its last item's node; two windows share a node exactly when they
share the prefix up to it (nodes are made once per parent and item key). So the longest common prefix of
two windows is the depth of their lowest common ancestor, and prefix sums of tokens live on the nodes:
a new window costs one node lookup per item that differs from the window before it, and comparing or
reading any earlier window costs O(log n) through skew-binary jump pointers (Myers' random-access
lists), whatever the windows' length. ``TreeWindow`` is what the cache model reads of one
(``ctxcore.analysis.cache.ListWindow`` is the same for a list).
"""

from collections.abc import Callable, Iterator, Sequence

from ctxcore.vocabulary import Item


class Node:
    __slots__ = ("breakpoint", "children", "depth", "item", "jump", "parent", "through", "unknown")

    def __init__(self, parent: "Node | None", item: Item | None) -> None:
        self.parent = parent
        self.item = item
        self.children: dict[tuple, Node] = {}
        if parent is None:
            self.depth = self.through = self.unknown = 0
            self.breakpoint: int | None = None
            self.jump = self
            return
        self.depth = parent.depth + 1
        tokens = item.tokens if item is not None else None
        self.through = parent.through + (tokens or 0)  # tokens of the path up to here, unknown as 0
        self.unknown = parent.unknown + (tokens is None)  # items of the path whose count is unknown
        marked = item is not None and item.cache_breakpoint
        self.breakpoint = self.depth - 1 if marked else parent.breakpoint  # the last marked index
        jump = parent.jump
        if parent.depth - jump.depth == jump.depth - jump.jump.depth:
            self.jump = jump.jump
        else:
            self.jump = parent


def cache_key(item: Item) -> tuple:
    """What the cache model tells apart: the content (as a provider's cache does: the same text under
    another id is the same prefix), and what the prefix sums and the cached extent read. An item whose
    count changed is another item here (the chain of hashes alone would call it the same)."""
    return (item.hash, item.tokens, item.cache_breakpoint)


def item_key(item: Item) -> tuple:
    """What a break's details read of an item besides: which item it is, its bucket and mode."""
    return (item.hash, item.tokens, item.cache_breakpoint, item.id, item.bucket, item.mode, item.kind)


class Tree:
    """Windows as paths, two items on one path when ``key`` gives them the same key."""

    def __init__(self, key: Callable[[Item], tuple]) -> None:
        self.root = Node(None, None)
        self.key = key

    def child(self, node: Node, item: Item) -> Node:
        key = self.key(item)
        found = node.children.get(key)
        if found is None:
            found = node.children[key] = Node(node, item)
        return found


def ancestor(node: Node, depth: int) -> Node:
    """The node of ``node``'s path at ``depth`` (0: the root)."""
    while node.depth > depth:
        node = node.jump if node.jump.depth >= depth else node.parent  # type: ignore[assignment]
    return node


def common_depth(first: Node, second: Node) -> int:
    """How many leading items the two nodes' windows share."""
    if first.depth > second.depth:
        first = ancestor(first, second.depth)
    elif second.depth > first.depth:
        second = ancestor(second, first.depth)
    while first is not second:
        if first.jump is not second.jump:
            first, second = first.jump, second.jump
        else:
            first, second = first.parent, second.parent  # type: ignore[assignment]
    return first.depth


class _Path(Sequence):
    """A node's window as a read-only sequence: O(log n) per index, O(n) to walk."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def __len__(self) -> int:
        return self.node.depth

    def _node(self, index: int) -> Node:
        if index < 0:
            index += self.node.depth
        if not 0 <= index < self.node.depth:
            raise IndexError(index)
        return ancestor(self.node, index + 1)

    def __iter__(self) -> Iterator:
        nodes = []
        node = self.node
        while node.parent is not None:
            nodes.append(node)
            node = node.parent
        return (self._value(node) for node in reversed(nodes))

    def __getitem__(self, index):  # type: ignore[override]
        return self._value(self._node(index))

    def _value(self, node: Node):
        return node.item


class Items(_Path):
    """The window's items."""


class Triples(_Path):
    """The window's ``[id, hash, bucket]`` per item, as the cache model keeps a recent call's items."""

    def _value(self, node: Node) -> list:
        item = node.item
        return [item.id, item.hash, item.bucket]


class Cumulative(Sequence):
    """``cum[i]`` = tokens of the window's first ``i`` items (unknown as 0)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def __len__(self) -> int:
        return self.node.depth + 1

    def __getitem__(self, index):  # type: ignore[override]
        if not 0 <= index <= self.node.depth:
            raise IndexError(index)
        return ancestor(self.node, index).through


class TreeWindow:
    """What the cache model reads of a window (see ``cache.ListWindow``): its last node in a tree by
    ``cache_key`` (prefixes, sums) and in one by ``item_key`` (the items, for a break's details)."""

    def __init__(self, node: Node, named: Node) -> None:
        self.node = node
        self.chain = node  # a recent call's chain: its last node
        self.cum = Cumulative(node)
        self.last_breakpoint = node.breakpoint
        self.items = Items(named)
        self.named = named

    def common(self, other_chain: Node) -> int:
        return common_depth(self.node, other_chain)

    def triples(self) -> Triples:
        return Triples(self.named)
