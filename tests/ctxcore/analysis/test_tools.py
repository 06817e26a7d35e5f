"""The tool catalogue of a call (ctxcore.analysis.tools): its own definitions and its agent's sub-agents."""

from ctxcore.analysis import tools
from tests.ctxcore.analysis.builders import call, message, system


def test_the_sub_agents_an_agent_declares_are_offered_after_the_calls_own_tools():
    assert tools.offered(["final_answer"], ["researcher", "final_answer"]) == ("final_answer", "researcher")
    offering = call(1, [system(), message(1)], tool_definitions=["final_answer"], agent_tools=["researcher"])
    assert tools.catalogue(offering) == {"final_answer": None, "researcher": None}


def test_sub_agents_alone_are_not_a_catalogue():
    # A call that did not report its tools may offer any: its agent's sub-agents are not all of them.
    assert tools.offered(None, ["researcher"]) is None
    assert tools.catalogue(call(1, [system(), message(1)], agent_tools=["researcher"])) is None
