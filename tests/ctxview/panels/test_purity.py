"""The panels' and the pages' shaping code imports no Django: only ``ctxview.queries`` (the reads) may."""

import ast
from pathlib import Path

import pytest

CTXVIEW = Path(__file__).resolve().parents[3] / "ctxview"
PURE = sorted([*(CTXVIEW / "panels").glob("*.py"), *(CTXVIEW / "shapes").glob("*.py")])


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", PURE, ids=lambda path: path.name)
def test_panel_module_imports_no_django(path):
    assert imported(path) & {"django", "ingest", "celery"} == set()
