"""Pure modules must not import Django (or Celery): they are tested and reused without it."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PURE = [ROOT / "ingest" / "otlp.py", ROOT / "ingest" / "budget.py", *sorted((ROOT / "ctxview" / "analysis").glob("**/*.py"))]
PURE += [path for path in [ROOT / "ingest" / "normalise.py"] if path.exists()]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", PURE, ids=lambda path: str(path.relative_to(ROOT)))
def test_pure_module_imports_no_django(path):
    forbidden = imported_modules(path) & {"django", "celery"}
    assert forbidden == set(), f"{path.name} imports {forbidden}"
