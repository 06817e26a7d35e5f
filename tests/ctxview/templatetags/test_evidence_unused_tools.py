"""The unused-tools evidence says what it does not know: tools without a definition in the window make the
tokens a floor, or unknown; never 0."""

from django.template.loader import render_to_string


def render(**evidence) -> str:
    return " ".join(render_to_string("findings/evidence/unused_tools.html", {"e": evidence}).split())


def test_known_partial_and_unknown_tokens():
    tools = [{"name": "search_logs", "calls": 2, "tokens": 474}]
    assert "— 474 tokens (" in render(tools=tools, tokens=474, share_of_billed_input=0.1)
    partial = render(
        tools=[*tools, {"name": "researcher", "calls": 2, "tokens": None}],
        tokens=474,
        tokens_unknown_for=["researcher"],
        share_of_billed_input=None,
    )
    assert "at least 474 tokens (no definition in the window for <code>researcher</code>)" in partial
    unknown = render(
        tools=[{"name": "researcher", "calls": 2, "tokens": None}],
        tokens=None,
        tokens_unknown_for=["researcher"],
        share_of_billed_input=None,
    )
    assert "tokens unknown" in unknown and " 0 tokens" not in unknown
