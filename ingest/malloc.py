"""Make glibc's malloc give large freed blocks back to the system, in the server's long-lived processes.
No Django here.

A batch is a few MiB of request body, decompressed protobuf and rows. glibc serves such blocks from
mmap at first, but raises its mmap threshold each time one is freed (up to 32 MiB), so that the next
ones come from the heap, which keeps them once freed; and each thread that allocates gets its own heap
(arena), up to eight per core. A web worker's 4 threads and a Celery process each kept the high-water
mark of the largest batches they had handled: peak PSS of web + 2 workers under the chats load, 434 MiB.
A fixed threshold (blocks of 256 KiB and more always mmapped, unmapped when freed) and 2 arenas:
335 MiB, at the same throughput (issue 19; docs/performance.md).

The settings are process-wide and inherited across fork: call this in a parent before it forks its
workers (and before it starts threads, for the arena limit to apply to them).
"""

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

# mallopt's parameters (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8

MMAP_THRESHOLD_BYTES = 256 * 1024
ARENA_MAX = 2


def return_large_blocks() -> bool:
    """Apply the settings; False where the C library is not glibc (nothing to do there)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018  (musl has a mallopt that does nothing: glibc only)
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # mallopt returns 1 on success, 0 on error.
    applied = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(M_ARENA_MAX, ARENA_MAX) == 1
    if not applied:
        logger.warning("mallopt refused the settings; freed memory stays with each process")
    return applied
