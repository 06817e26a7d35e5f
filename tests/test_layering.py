"""The layers: the pure core (ctxcore) <- the write side (ingest) <- the read side (ctxview).

Each imports only the layers below it; a module that says it has no Django (and everything in ctxcore
and ingest/families) reaches no Django or Celery through any import; no module imports itself through
others (an import cycle), counting imports inside functions too.
"""

import ast
import re
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ctxcore", "ingest", "ctxview", "ctxview_sdk")
LAYER = {"ctxcore": 0, "ctxview_sdk": 1, "ingest": 1, "ctxview": 2}
FRAMEWORKS = {"django", "celery"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.glob("**/*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[0] not in PACKAGES or "migrations" in parts:
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


@cache
def imports(name: str) -> tuple[frozenset[str], frozenset[str]]:
    """The project modules and the outside top-level packages that module ``name`` imports."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    inside, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
            submodules: list[str] = []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from package import module`` imports that module (and runs the package's __init__,
            # which Python allows to be part-way through: not a cycle of ours).
            submodules = [
                f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in MODULES
            ]
            targets = [target] if len(submodules) < len(node.names) else []
        else:
            continue
        for target in [*targets, *submodules]:
            if target in MODULES:
                inside.add(target)
            elif target.split(".")[0] not in PACKAGES:
                outside.add(target.split(".")[0])
    inside.discard(name)
    return frozenset(inside), frozenset(outside)


def reached(name: str) -> set[str]:
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(imports(current)[0])
    return seen


def _says_no_django(path: Path) -> bool:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    return re.search(r"\bno django\b", docstring, re.IGNORECASE) is not None


PURE = sorted(
    name
    for name, path in MODULES.items()
    if name.startswith(("ctxcore", "ingest.families", "ctxview_sdk")) or _says_no_django(path)
)


def test_the_pure_list_holds_what_it_should():
    assert {
        "ctxcore.catalogue",
        "ctxcore.vocabulary",
        "ingest.normalise",
        "ingest.otlp",
        "ingest.usage",
    } <= set(PURE)
    assert len(PURE) >= 30


@pytest.mark.parametrize("name", PURE)
def test_a_pure_module_reaches_no_django(name):
    frameworks = {framework for module in reached(name) for framework in imports(module)[1] & FRAMEWORKS}
    assert frameworks == set(), f"{name} reaches {frameworks}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_a_module_imports_only_its_layer_and_those_below(name):
    layer = LAYER[name.split(".")[0]]
    above = sorted(target for target in imports(name)[0] if LAYER[target.split(".")[0]] > layer)
    assert above == [], f"{name} imports {above} from a layer above it"


def test_there_is_no_import_cycle():
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(name: str) -> None:  # Tarjan's strongly connected components
        index[name] = low[name] = len(index)
        stack.append(name)
        for target in imports(name)[0]:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == name:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(MODULES):
        if name not in index:
            visit(name)
    assert cycles == []


# The modules that hold views (what the URL conf routes to); what they share lives in views_common and
# api_common, so no view module imports another one.
VIEW_MODULES = sorted(
    name
    for name in MODULES
    if re.fullmatch(r"ctxview\.(views|views_\w+|api|\w+_api)", name) and name not in ("ctxview.views_common",)
)


def test_the_view_modules_are_those_the_url_conf_routes_to():
    assert {
        "ctxview.api",
        "ctxview.review_api",
        "ctxview.replay_api",
        "ctxview.views",
        "ctxview.views_run",
    } <= set(VIEW_MODULES)
    assert {target for target in imports("ctxview.urls")[0] if target in VIEW_MODULES} == set(VIEW_MODULES)


@pytest.mark.parametrize("name", VIEW_MODULES)
def test_a_view_module_imports_no_other_view_module(name):
    assert sorted(imports(name)[0] & set(VIEW_MODULES)) == [], (
        f"{name}: move what is shared to a *_common module"
    )


# Inside the write side: five layers, each importing only its own and those below. A span goes down
# through them: an entry point accepts it, the pipeline runs its steps, the steps store rows made from
# what the reading layer read, on the tables and wire formats at the bottom.
INGEST_LAYERS: dict[str, tuple[str, ...]] = {
    # the tables, the wire formats and the helpers every layer uses; no reading or storing logic
    "foundations": (
        "models", "keys", "locks", "raw_rows", "itemlists", "bulk", "compact", "lookups", "rollups",
        "otlp", "semconv", "span_rows", "tokens", "rendering", "redact", "budget", "ratelimit", "malloc",
        "export_format", "turns", "tool_executions", "records", "storable",
    ),
    # spans read into call records, with no database (ingest.families is the one package here)
    "reading": ("families", "usage", "normalise", "manifest", "continuations", "agents", "sessions"),
    # call records stored as rows: each step's work, on the tables
    "storing": (
        "call_rows", "contents", "dedup", "late_content", "numbering", "analyse", "agent_sessions",
        "titles", "retention", "partitions",
    ),
    # a batch's steps in order (pipeline), the steps (calls, continued_calls), the batch's transaction
    "pipeline": ("store", "pipeline", "work", "calls", "continued_calls", "session_calls"),
    # what the outside calls: the receivers, the tasks, the import, the app and the commands
    "entry": ("receiver", "grpc_receiver", "accept", "tasks", "imports", "apps", "management"),
}  # fmt: skip


def ingest_layer(name: str) -> int:
    """The index of module ``name``'s layer in INGEST_LAYERS (a package's modules are in its layer)."""
    first = name.split(".")[1] if "." in name else ""
    for index, members in enumerate(INGEST_LAYERS.values()):
        if first in members:
            return index
    raise LookupError(f"{name} is in no layer of INGEST_LAYERS: say where it belongs")


INGEST_MODULES = sorted(name for name in MODULES if name.startswith("ingest.") and name != "ingest")


def unit(name: str) -> str:
    """The unit a chain counts: a module, or the families package as one (its own shape, a registry over
    one module per instrumentation family on a few shared ones, is tested below)."""
    return "ingest.families" if name.startswith("ingest.families.") else name


def longest_chain(members: set[str]) -> list[str]:
    """The longest chain of imports among the units of ``members`` (the graph has no cycles: tested above)."""
    units = {unit(name) for name in members}
    below_of: dict[str, set[str]] = {name: set() for name in units}
    for name in members:
        below_of[unit(name)] |= {unit(target) for target in imports(name)[0] if unit(target) in units}
        below_of[unit(name)].discard(unit(name))

    @cache
    def from_(name: str) -> tuple[str, ...]:
        return (name, *max((from_(target) for target in below_of[name]), key=len, default=()))

    return list(max((from_(name) for name in units), key=len))


@pytest.mark.parametrize("name", INGEST_MODULES)
def test_an_ingest_module_imports_only_its_layer_and_those_below(name):
    layer = ingest_layer(name)
    above = sorted(
        target for target in imports(name)[0] if target.startswith("ingest.") and ingest_layer(target) > layer
    )
    assert above == [], f"{name} ({list(INGEST_LAYERS)[layer]}) imports {above} from a layer above it"


# Inside a layer modules may import each other, but not as a tower.
MAX_CHAIN_IN_A_LAYER = 4


@pytest.mark.parametrize("layer", list(INGEST_LAYERS))
def test_an_ingest_layer_is_at_most_four_modules_deep(layer):
    index = list(INGEST_LAYERS).index(layer)
    chain = longest_chain({name for name in INGEST_MODULES if ingest_layer(name) == index})
    assert len(chain) <= MAX_CHAIN_IN_A_LAYER, " -> ".join(chain)


# What the families share; every other module of the package is one family, which imports no other.
FAMILY_SHARED = {"base", "messages", "flattened", "providers"}


@pytest.mark.parametrize(
    "name", sorted(name for name in INGEST_MODULES if name.startswith("ingest.families."))
)
def test_a_family_imports_no_other_family(name):
    families = {
        target
        for target in imports(name)[0]
        if target.startswith("ingest.families.") and target.rpartition(".")[2] not in FAMILY_SHARED
    }
    assert families == set(), f"{name} imports {sorted(families)}: move what they share to base"
