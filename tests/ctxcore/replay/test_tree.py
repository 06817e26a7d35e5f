"""The prefix tree the replay keeps its windows in: ancestors, common prefixes and sums, against lists."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcore.analysis.cache import ListWindow
from ctxcore.replay.tree import Tree, TreeWindow, ancestor, cache_key, common_depth, item_key
from ctxcore.vocabulary import Item

windows = st.lists(st.lists(st.integers(0, 3), max_size=40), min_size=1, max_size=6)


def _item(number: int) -> Item:
    return Item.from_dict(
        {"id": f"i{number}", "kind": "message", "bucket": "conversation", "hash": f"h{number}",
         "tokens": None if number == 3 else 10 + number, "cache_breakpoint": number == 2},
        0,
    )  # fmt: skip


def _path(tree: Tree, numbers: list[int]):
    node = tree.root
    for number in numbers:
        node = tree.child(node, _item(number))
    return node


@settings(max_examples=200, deadline=None)
@given(windows)
def test_the_tree_answers_what_the_lists_answer(lists):
    tree, named = Tree(cache_key), Tree(item_key)
    ends = [TreeWindow(_path(tree, numbers), _path(named, numbers)) for numbers in lists]
    plain = [ListWindow([_item(number) for number in numbers]) for numbers in lists]
    for end, window in zip(ends, plain, strict=True):
        assert list(end.cum) == window.cum
        assert end.last_breakpoint == window.last_breakpoint
        assert list(end.triples()) == window.triples()
        assert [end.items[index] for index in range(len(window.items))] == list(window.items)
        for depth in range(len(window.items) + 1):
            assert ancestor(end.node, depth).depth == depth
        for other, other_window in zip(ends, plain, strict=True):
            assert end.common(other.chain) == window.common(other_window.chain)
            assert common_depth(end.node, other.node) == common_depth(other.node, end.node)


def test_equal_prefixes_share_their_nodes():
    tree = Tree(cache_key)
    assert _path(tree, [0, 1, 2]).parent is _path(tree, [0, 1, 3]).parent
    assert _path(tree, [0, 1]) is not _path(tree, [1, 1])
