"""The SDK goes into agents: it must import without Django and need nothing but OpenTelemetry (and the
shared vocabulary of ctxview's pure core, which itself needs only the standard library)."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "ctxview_sdk"
# tiktoken: optional; requests: what the OTLP/HTTP exporter itself sends with (its session is given a hook)
ALLOWED = set(sys.stdlib_module_names) | {"opentelemetry", "tiktoken", "ctxcore", "requests"}


def test_sdk_modules_import_only_the_stdlib_and_opentelemetry():
    for path in [*SDK.glob("*.py"), ROOT / "ctxcore" / "vocabulary.py"]:
        allowed = ALLOWED if path.parent == SDK else set(sys.stdlib_module_names)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = {node.module.split(".")[0]}
            else:
                continue
            assert names <= allowed, f"{path.name} imports {names - allowed}"


def test_importing_the_sdk_loads_no_django():
    code = "import sys, ctxview_sdk; print([m for m in sys.modules if m.startswith(('django', 'celery'))])"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=SDK.parent, capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"
