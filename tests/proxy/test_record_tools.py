"""What the proxy records of an OpenAI request's tools: a custom or built-in tool kept whole (its text
reaches the model: Codex's apply_patch has a long description and a Lark grammar), a function tool as
the conventions' shape."""

from ctxview.proxy.record import _openai_tools

GRAMMAR = 'start: "*** Begin Patch" LF hunk+ "*** End Patch"'


def test_a_custom_tool_keeps_its_description_and_grammar_and_a_function_its_schema():
    tools = [
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "Use the apply_patch tool to edit files.",
            "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
        },
        {"type": "web_search"},
        {
            "type": "function",
            "name": "shell",
            "description": "Runs a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    ]
    custom, search, function = _openai_tools(tools)
    assert custom == {
        "type": "custom",
        "name": "apply_patch",
        "description": "Use the apply_patch tool to edit files.",
        "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
    }
    assert search == {"type": "web_search", "name": "web_search"}
    assert (function["name"], function["description"]) == ("shell", "Runs a command.")
    assert function["parameters"]["properties"] == {"command": {"type": "string"}}
