"""The server's rendering of structured content: the bytes the json module writes, faster."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# JSON as telemetry parses it, and what it may hold besides: lone surrogates, integers over 64 bits, floats
# of every kind (orjson writes those its own way), tuples and integer keys.
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(exclude_categories=())),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5) | st.integers(0, 3), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=500)
@given(JSON_VALUES)
def test_rendered_content_is_what_the_json_module_writes(value):
    """A rendered message is hashed: its text must be byte for byte what the vocabulary's render (the
    json module) writes, which the SDK uses too."""
    import json

    from ctxcore.vocabulary import render as render_with_json
    from ingest.rendering import render

    expected = (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    )
    assert render(value) == expected == render_with_json(value)


@pytest.mark.parametrize("depth", [300, 600, 900, 2000])
def test_deeply_nested_content_renders_as_the_json_module_writes_it(depth):
    """orjson refuses more than 255 levels, and the float check recurses: deeper content goes to the
    json module, which writes it or refuses it as before."""
    import json

    from ingest.rendering import render

    value: list = ["leaf"]
    for _ in range(depth):
        value = [value]
    try:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        with pytest.raises(RecursionError):
            render(value)
    else:
        assert render(value) == expected
