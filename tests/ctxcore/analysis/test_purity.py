"""The analysis package is pure: it imports neither Django nor Celery, even at run time."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "ctxview" / "analysis"
MODULES = sorted(PACKAGE.glob("*.py"))


def test_no_module_imports_django_celery_or_the_rest_of_the_project():
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in {"django", "celery", "ingest"}, f"{path.name} imports {name}"
                assert top != "ctxview" or name.startswith("ctxcore.analysis"), f"{path.name} imports {name}"


def test_importing_every_module_loads_neither_django_nor_celery():
    # ctxview/__init__.py starts the Celery app, so the package is loaded without it here.
    script = f"""
import importlib, sys, types
package = types.ModuleType("ctxview")
package.__path__ = [{str(ROOT / "ctxview")!r}]
sys.modules["ctxview"] = package
for name in {[path.stem for path in MODULES]!r}:
    importlib.import_module("ctxcore.analysis" if name == "__init__" else "ctxcore.analysis." + name)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in ("django", "celery"))
print(",".join(loaded))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == ""
