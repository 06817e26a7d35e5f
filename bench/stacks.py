"""Sum py-spy's collapsed stacks (``py-spy record --format raw``) by function: self and total share.

.venv/bin/python bench/stacks.py /tmp/prof/postgres-1-worker0.txt [--top 40] [--match ingest/]
"""

import argparse
import re
from collections import Counter
from pathlib import Path

FRAME = re.compile(r"^(?P<function>.+?) \((?P<file>.+?)(?::(?P<line>\d+))?\)$")


def short(frame: str) -> str:
    """``function (path/to/file.py:12)`` -> ``file.py:function`` (the line dropped, so lines add up)."""
    match = FRAME.match(frame)
    if not match:
        return frame
    path = match["file"]
    for marker in ("site-packages/", "/work/main/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{path}:{match['function']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="", help="only functions whose file contains this")
    parser.add_argument("--callees", help="instead: what the function named so (file.py:name) spends in")
    parser.add_argument("--within", default="", help="only stacks through this function")
    args = parser.parse_args()
    own: Counter = Counter()
    total: Counter = Counter()
    callees: Counter = Counter()
    samples = 0
    for path in args.files:
        for line in path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            frames = [short(frame) for frame in stack.split(";")]
            if frames and frames[0].startswith("process "):
                frames = frames[1:]  # --subprocesses prefixes the process
            weight = int(count)
            samples += weight
            if frames:
                own[frames[-1]] += weight
            for frame in set(frames):
                total[frame] += weight
            if args.within and args.within not in frames:
                continue
            if args.callees and args.callees in frames:
                below = frames[frames.index(args.callees) + 1 :]
                callees[below[0] if below else "(self)"] += weight
    if args.callees:
        inside = sum(callees.values())
        print(f"{args.callees}: {100 * inside / samples:.1f}% of {samples} samples; its callees:")
        for frame, count in callees.most_common(args.top):
            print(f"{100 * count / samples:6.1f}%  {frame}")
        return
    print(f"{samples} samples")
    for title, counter in (("total (inclusive)", total), ("self", own)):
        print(f"\n{title}:")
        shown = 0
        for frame, count in counter.most_common():
            if args.match not in frame:
                continue
            print(f"{100 * count / samples:6.1f}%  {frame}")
            shown += 1
            if shown == args.top:
                break


if __name__ == "__main__":
    main()
