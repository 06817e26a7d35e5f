"""The README's tables of finding types and cache-break causes, written from ``ctxcore.catalogue``.

``python -m ctxcore.catalogue_docs README.md`` rewrites the blocks between the markers; a test fails when
the README and the catalogue disagree.
"""

import re
import sys
from pathlib import Path

from ctxcore.catalogue import CAUSES, FINDING_TYPES


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def findings_table() -> str:
    rows = ["| Finding | Severity | What it means | Fix |", "|---|---|---|---|"]
    for entry in FINDING_TYPES.values():
        fix = entry.fix or "the fix of its cause (below)"
        rows.append(f"| `{entry.name}` | {entry.severity} | {_cell(entry.help)} | {_cell(fix)} |")
    return "\n".join(rows)


def causes_table() -> str:
    rows = ["| Cause | Part of the request | What happened | Fix |", "|---|---|---|---|"]
    for entry in CAUSES.values():
        area = entry.area or "—"
        rows.append(f"| `{entry.name}` | {area} | {_cell(entry.help)} | {_cell(entry.fix)} |")
    return "\n".join(rows)


BLOCKS = {"findings": findings_table, "causes": causes_table}


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- catalogue:{name} -->\n).*?(<!-- /catalogue:{name} -->)", re.S)


def render(text: str) -> str:
    """``text`` with every catalogue block rewritten from the catalogue."""
    for name, table in BLOCKS.items():
        text = _pattern(name).sub(lambda match, table=table: match[1] + table() + "\n" + match[2], text)
    return text


def blocks(text: str) -> dict[str, str | None]:
    """The content of each catalogue block in ``text`` (None where the block is missing)."""
    found = {name: _pattern(name).search(text) for name in BLOCKS}
    return {name: match[0] if match else None for name, match in found.items()}


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    path.write_text(render(path.read_text()))
