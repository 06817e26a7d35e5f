"""The import fuzz's cases and their check (tests/fuzz/test_import.py, tests/fuzz/test_import_rest.py).

The document is the first export ctxview wrote (tests/data/exports/run-export-v1-b026b87.json), cut to
its first two calls so a case stays cheap. Each case changes one to three places of it (any field, at any
depth): a value of another type, a number out of range, a part taken out, an entry twice, a value nested
deep, a huge text or list. Each answer must be one of:
- 201, and then the run's API resources answer 200 and its export is a valid export again; every page of
  the run (UI, partials and API, tests/ctxview/import_pages.py) answers 200 for each new kind of change
  (how, and which field of the format, to its third named step: ``kind_of_change``): rendering every
  page costs half a second a case, and the same change of the same field renders through the same code;
- a 4xx whose message names a place of the document that exists (the last step may be what is missing),
  or the body, and nothing stored in any project.
The places are split in two (the items of the calls, and everything else), one test file each, so the
two halves run on two cores.
"""

import copy
import json
import re
from pathlib import Path

import requests
from django.conf import settings as django_settings
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

from ctxview import writes
from ingest import export_format
from ingest.models import Run
from tests import factories
from tests.ctxview.import_pages import pages_of, stored_rows
from tests.fuzz.conftest import CASES, bounded, budget

EXPORT = Path(__file__).resolve().parents[1] / "data" / "exports" / "run-export-v1-b026b87.json"
# What is refused before the document is read as an export: the body itself (its top level is "the
# body": a key there that cannot be stored has no path of its own).
BODY_REFUSALS = (
    "the body is nested deeper than",
    "the body is larger than",
    "the body is not valid JSON",
    "the body: ",
)
_STEP = re.compile(r'\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]|\.?([A-Za-z_][A-Za-z0-9_]*)')


def small_export() -> dict:
    document = json.loads(EXPORT.read_text())
    document["calls"] = document["calls"][:2]
    hashes = {item["hash"] for call in document["calls"] for item in call["items"]}
    document["contents"] = {h: value for h, value in document["contents"].items() if h in hashes}
    document["notes"][0]["call_seq"] = 2
    document["bookmarks"] = [2]
    document["findings"] = document["findings"][:1]
    return document


BASE = small_export()


def places(value, path=()) -> list[tuple]:
    """Every place in the document: each key of an object and each entry of a list, at any depth."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += places(item, (*path, index))
    return found


PLACES = places(BASE)[1:]
NUMBERS = [-1, -(2**63), 0, 2**31, 2**53, 2**63, 2**70, 10**30, 1.5, 1.5e300, 2.0]
NESTED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


def deep(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


REPLACEMENTS = st.one_of(
    NESTED,  # another type, or a structure where a scalar was
    st.sampled_from(NUMBERS),
    st.sampled_from(["", "x" * 300_000, "\u202e\u0000", "2026-13-45T99:00:00", "javascript:alert(1)"]),
    st.builds(deep, st.sampled_from([20, 40, 70])),
    st.builds(lambda n: list(range(n)), st.sampled_from([1, 25_001, 60_000])),
)


ITEM_PLACES = [path for path in PLACES if path[:1] == ("calls",) and path[2:3] == ("items",)]
OTHER_PLACES = [path for path in PLACES if path not in ITEM_PLACES]


@st.composite
def broken(draw, places: list[tuple]) -> tuple[dict, list[str]]:
    document = copy.deepcopy(BASE)
    done = []
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(places))
        parent = _at(document, path[:-1])
        if not isinstance(parent, dict | list) or _at(parent, path[-1:]) is _MISSING:
            continue  # an earlier change of this case took it away
        how = draw(st.sampled_from(["replace", "remove", "twice", "extra"]))
        kind = ""
        if how == "replace":
            parent[path[-1]] = draw(REPLACEMENTS)
            kind = type(parent[path[-1]]).__name__
        elif how == "remove":
            del parent[path[-1]]
        elif how == "twice" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        elif how == "extra" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = value = draw(NESTED)
            kind = type(value).__name__
        done.append((how, path, kind))
    return document, done


def kind_of_change(done: list[tuple]) -> tuple:
    """What was changed, where, as a field of the format: list indexes and content hashes left out
    (calls[0].usage.output and calls[1].usage.output are one field), cut after its third named step
    (calls[].usage_raw.<key>, whatever is nested in it), and the parts an import does not read
    (findings, accounting, source) as one each."""

    def field(path: tuple) -> tuple:
        steps = tuple("[]" if isinstance(step, int) else step for step in path)
        if steps[:1] == ("contents",):
            steps = ("contents", "*", *steps[2:])
        if steps[:1] in (("findings",), ("accounting",), ("source",)):
            return steps[:1]
        named = [index for index, step in enumerate(steps) if step not in ("[]", "*")]
        return steps[: named[2] + 1] if len(named) > 2 else steps  # calls[].usage_raw.<key>: one field

    return tuple(sorted({(how, field(path)) for how, path, _ in done}))


_MISSING = object()


def _at(document, path):
    value = document
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return value


def names_a_place(message: str, document) -> bool:
    """The refusal names the body, the document, or a path whose every step but the last exists in it."""
    if message.startswith(BODY_REFUSALS):
        return True
    said = message.removeprefix("cannot import: ")
    if said.startswith(("the document must be a JSON object", "format:", "version:")):
        return True
    steps, at = [], 0  # steps read one after another from the start: a quoted key may hold a colon
    while match := _STEP.match(said, at):
        index, quoted, name = match.groups()
        steps.append(
            int(index) if index is not None else json.loads(f'"{quoted}"') if quoted is not None else name
        )
        at = match.end()
    if not steps or not said.startswith(": ", at):
        return False
    value = document
    for step in steps[:-1]:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(value, dict | list)


def check_broken_imports(live_server, alice, settings, places: list[tuple], deep: int) -> None:
    """Import ``deep`` broken documents (fewer outside the deep profile), each changed at ``places``."""
    settings.CTXVIEW_REPLAYS_PER_MINUTE = 1_000_000  # each imported run's replay pages are read here
    project, key = factories.project_with_key("gamma", owner=alice)
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {key}"
    pages = requests.Session()  # a logged-in admin: the UI pages as well as the API
    browser = Client()
    browser.force_login(alice)
    name = django_settings.SESSION_COOKIE_NAME
    pages.cookies.set(name, browser.cookies[name].value)
    outcomes: dict[str, int] = {}
    rendered: set[tuple] = set()

    @budget(30, deep=deep, deadline_ms=60_000, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(case=broken(places))
    def check(case):
        document, done = case
        before = stored_rows()
        with bounded(60):
            response = api.post(
                f"{live_server.url}/api/v1/projects/{project.slug}/import",
                data=json.dumps(document),
                headers={"Content-Type": "application/json"},
            )
        CASES["import: broken real exports"] += 1
        if response.status_code == 201:
            outcomes["imported"] = outcomes.get("imported", 0) + 1
            run = Run.objects.get(id=response.json()["run"])
            resources = [f"/api/v1/runs/{run.id}{rest}" for rest in ("", "/calls", "/findings", "/export")]
            resources += [
                f"/api/v1/calls/{call_id}?content=1" for call_id in run.calls.values_list("id", flat=True)
            ]
            if kind_of_change(done) not in rendered:
                rendered.add(kind_of_change(done))
                resources = pages_of(run)
            answers = {page: pages.get(f"{live_server.url}{page}") for page in resources}
            writes.delete_run(run)
            assert [(page, r.status_code) for page, r in answers.items() if r.status_code != 200] == [], done
            export = answers[f"/api/v1/runs/{run.id}/export"].json()
            assert export_format.problem(export) is None, (done, export_format.problem(export))
            return
        outcomes[str(response.status_code)] = outcomes.get(str(response.status_code), 0) + 1
        assert 400 <= response.status_code < 500, (done, response.status_code, response.text[:500])
        message = response.json()["error"]
        assert names_a_place(message, document), (done, message)
        assert "Error(" not in message and "Traceback" not in message, message
        assert stored_rows() == before, (done, message)

    check()
    print(f"outcomes: {sorted(outcomes.items())}; every page rendered for {len(rendered)} kinds of change")
    assert outcomes.get("imported") and outcomes.get("400"), outcomes  # both kinds were exercised
