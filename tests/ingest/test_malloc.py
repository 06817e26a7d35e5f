"""ingest.malloc: large freed blocks go back to the system, in the processes that call it."""

import subprocess
import sys

# In a fresh process: free a 4 MiB block (which raises glibc's mmap threshold to 4 MiB when left alone),
# then allocate 300 KiB and print whether it was mmapped (mallinfo2's count of mmapped blocks went up).
PROBE = """
import ctypes, ctypes.util, sys
from ingest.malloc import return_large_blocks

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                 "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "on":
    assert return_large_blocks()
libc.free(libc.malloc(4 * 1024 * 1024))
before = libc.mallinfo2().hblks
block = libc.malloc(300 * 1024)
print(libc.mallinfo2().hblks - before)
libc.free(block)
"""


def mmapped_after_a_large_free(setting: str) -> int:
    done = subprocess.run([sys.executable, "-c", PROBE, setting], capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_a_block_of_300_kib_is_mmapped_even_after_a_larger_one_was_freed():
    assert mmapped_after_a_large_free("on") == 1


def test_left_alone_glibc_serves_it_from_the_heap():
    # The behaviour the module changes: if this fails, glibc no longer raises its threshold by itself.
    assert mmapped_after_a_large_free("off") == 0
