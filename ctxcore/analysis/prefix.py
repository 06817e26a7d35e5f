"""Chained prefix hashes over a call's render order, and the longest common prefix of two calls.

``h_i = H(h_{i-1} || item_hash_i)``: two calls agree on their first ``k`` items exactly when their
``k``-th chain hashes are equal, so the longest common prefix is a binary search over two chains
(O(log n) comparisons) instead of an item-by-item walk, and a chain stands for its whole prefix.
"""

import hashlib
from collections.abc import Iterable, Sequence

# 64-bit links: a collision needs ~4e9 distinct prefixes in one run's few recent calls; the chain
# only decides where two prompts diverge, never anything security-related.
LINK_BYTES = 8


def chain(item_hashes: Iterable[str], previous: str = "") -> list[str]:
    """The chained hash after each item: ``chain[i]`` covers items ``0..i`` (continued from the link
    ``previous`` covering items before them, if given)."""
    links = []
    for item_hash in item_hashes:
        previous = hashlib.blake2b(f"{previous}|{item_hash}".encode(), digest_size=LINK_BYTES).hexdigest()
        links.append(previous)
    return links


def common_prefix_length(chain_a: Sequence[str], chain_b: Sequence[str]) -> int:
    """How many leading items two calls share, from their chains (binary search)."""
    low, high = 0, min(len(chain_a), len(chain_b))
    while low < high:
        middle = (low + high + 1) // 2
        if chain_a[middle - 1] == chain_b[middle - 1]:
            low = middle
        else:
            high = middle - 1
    return low


def naive_common_prefix_length(hashes_a: Sequence[str], hashes_b: Sequence[str]) -> int:
    """The same answer, item by item (the reference the chained version is tested against)."""
    length = 0
    for a, b in zip(hashes_a, hashes_b, strict=False):
        if a != b:
            break
        length += 1
    return length
