"""The catalogues are the one home of finding types and causes: everything else is derived from them."""

import ast
import json
import re
from pathlib import Path

import pytest

from ctxcore import catalogue, catalogue_docs

ROOT = Path(__file__).resolve().parent.parent.parent


def _names_looked_up(function: str) -> set[str]:
    """Every string literal passed to ``function(...)`` anywhere in ctxcore."""
    names = set()
    for path in (ROOT / "ctxcore").glob("**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == function
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names.add(node.args[0].value)
    return names


def test_every_type_and_cause_the_analyses_name_is_in_the_catalogue():
    looked_up = _names_looked_up("finding_type")
    assert looked_up == set(catalogue.FINDING_TYPES), "a type raised nowhere, or raised but not catalogued"
    assert _names_looked_up("cause_entry") == set(catalogue.CAUSES)


def test_a_missing_name_fails_at_lookup_not_later():
    with pytest.raises(KeyError, match="no_such_type"):
        catalogue.finding_type("no_such_type")
    with pytest.raises(KeyError, match="no_such_cause"):
        catalogue.cause("no_such_cause")


@pytest.mark.parametrize("entry", catalogue.FINDING_TYPES.values(), ids=lambda entry: entry.name)
def test_every_finding_type_is_complete(entry):
    assert entry.severity in catalogue.SEVERITIES
    assert entry.title and entry.help.endswith(".")
    assert (ROOT / "templates" / entry.evidence_template).is_file()
    # A type without its own fix takes its cause's: those are the types that carry a cache-break cause.
    assert (entry.fix is None) == (entry.name in ("cache_invalidated", "invisible_invalidator"))


@pytest.mark.parametrize("entry", catalogue.CAUSES.values(), ids=lambda entry: entry.name)
def test_every_cause_is_complete(entry):
    assert entry.title and entry.help and entry.fix.endswith(".")
    assert entry.area in (None, "model", "tools", "system", "history")
    assert (ROOT / "templates" / entry.detail_template).is_file(), f"no template {entry.detail_template}"


def test_no_template_branches_on_a_cause_by_name():
    """A cause's details live in its own template, so a new cause is one file, not an elif to find."""
    branching = re.compile(r"\.cause\s*==")
    found = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "templates").rglob("*.html")
        if branching.search(path.read_text())
    ]
    assert found == [], found


def test_a_finding_s_fix_is_its_cause_s_when_it_carries_one():
    assert catalogue.fix("cache_invalidated", "key_order") == catalogue.CAUSES["key_order"].fix
    assert catalogue.fix("fact_dropped", None) == catalogue.FINDING_TYPES["fact_dropped"].fix
    assert "does not describe" in catalogue.finding_help("new_kind")
    assert catalogue.cause_help(None) == "" and catalogue.cause_help("new_cause") == ""


def test_the_openapi_enums_are_the_catalogue():
    from ctxview.api import OPENAPI

    schemas = OPENAPI["components"]["schemas"]
    assert schemas["Finding"]["properties"]["type"]["enum"] == list(catalogue.FINDING_TYPES)
    assert schemas["Finding"]["properties"]["cause"]["enum"] == [*catalogue.CAUSES, None]
    assert schemas["Call"]["properties"]["cache"]["properties"]["cause"]["enum"] == [*catalogue.CAUSES, None]
    # The file itself names none of them: it cannot drift from the catalogue.
    text = json.dumps(json.loads((ROOT / "ctxview" / "openapi.json").read_text()))
    assert not any(f'"{name}"' in text for name in catalogue.CAUSES if name != "invisible")


def test_the_readme_tables_are_the_catalogue():
    readme = (ROOT / "README.md").read_text()
    found = catalogue_docs.blocks(readme)
    assert None not in found.values(), "the README lost a catalogue block"
    assert readme == catalogue_docs.render(readme), "run: python -m ctxcore.catalogue_docs README.md"
