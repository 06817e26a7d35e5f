"""Agent invocations and sessions from a trace's span tree (ingest.agents, pure: no database)."""

import pytest

from ingest import agents
from ingest.agents import AgentSpan, Placed, Tree


def agent(span_id, parent, name, start, run_key="trace", node_id="", node_parent_id=""):
    return AgentSpan(span_id, parent, name, start, run_key, node_id, node_parent_id)


def resolve(links, tools, spans):
    tree = Tree(links, tools)
    by_id = {span.span_id: span for span in spans}
    return tree, by_id, agents.invocations(tree, by_id)


def test_an_agent_span_names_its_agent_and_a_workflow_span_is_none():
    attributes = {"agent.name": "triage", "graph.node.id": "triage", "graph.node.parent_id": "root"}
    found = agents.agent_span("a1", "w1", attributes, 5, "trace")
    assert (found.name, found.node_id, found.node_parent_id) == ("triage", "triage", "root")
    assert agents.agent_span("w1", "", {"openinference.span.kind": "AGENT"}, 1, "trace") is None
    assert agents.agent_span("a2", "", {"gen_ai.agent.id": "asst_1"}, 1, "trace").name == "asst_1"
    assert agents.agent_span("a3", "", {"gen_ai.agent.name": "  "}, 1, "trace") is None


def test_an_agent_span_named_only_by_its_span_name_is_marked_nameless():
    found = agents.agent_span("m1", "", {"openinference.span.kind": "AGENT"}, 1, "trace", "manager.run")
    assert (found.name, found.nameless) == ("manager.run", True)
    assert agents.agent_span("a1", "", {"agent.name": "triage"}, 1, "trace", "triage run").nameless is False


def test_the_sub_agents_an_agent_span_declares_are_tools_of_its_own_calls_only():
    # smolagents: manager m names its managed agent; the researcher r runs under m's step s.
    managed = {
        "openinference.span.kind": "AGENT",
        "smolagents.managed_agents.0.name": "researcher",
        "smolagents.managed_agents.0.description": "Finds facts.",
        "smolagents.managed_agents.1.name": " ",
    }
    manager = agents.agent_span("m", "", managed, 1, "trace", "manager.run")
    researcher = agents.agent_span("r", "s", {"openinference.span.kind": "AGENT"}, 2, "trace", "r.run")
    assert (manager.sub_agents, researcher.sub_agents) == (("researcher",), ())
    tree, by_id, found = resolve({"m": "", "s": "m", "r": "s"}, (), [manager, researcher])
    assert agents.call_agent("s", None, tree, by_id, found).tools == ("researcher",)
    assert agents.call_agent("r", None, tree, by_id, found).tools == ()
    # Also as one JSON list; junk names nothing.
    listed = {"smolagents.managed_agents": '[{"name": "a"}, {"name": "b"}, {"name": 3}, "c"]'}
    assert agents.agent_span("x", "", listed, 1, "trace", "x.run").sub_agents == ("a", "b")
    unnamed = {"smolagents.managed_agents": "a"}
    assert agents.agent_span("y", "", unnamed, 1, "trace", "y.run").sub_agents == ()


def test_a_nameless_agent_span_is_an_invocation_only_with_calls_of_its_own():
    # openai-agents: a nameless workflow w around the named triage t, whose call c1 is under t.
    # smolagents: nameless manager m with call c2, its nameless researcher r (under m's step s) with c3.
    links = {"w": "", "t": "w", "m": "", "s": "m", "r": "s"}
    spans = {
        "w": AgentSpan("w", "", "Agent workflow", 1, "trace", nameless=True),
        "t": agent("t", "w", "triage", 2),
        "m": AgentSpan("m", "", "manager.run", 3, "trace", nameless=True),
        "r": AgentSpan("r", "s", "researcher.run", 4, "trace", nameless=True),
    }
    tree = Tree(links, ())
    acting = agents.acting(tree, spans, ["t", "s", "r"])  # the calls' parents: t, m's step, r
    assert sorted(acting) == ["m", "r", "t"]
    found = agents.invocations(tree, acting)
    assert (found["t"].entered, found["t"].depth) == (agents.ROOT, 0)  # no workflow above it
    assert (found["r"].parent, found["r"].entered, found["r"].depth) == ("m", agents.SUBAGENT, 1)


def step_span(span_id, parent, name, start, step, step_of):
    return AgentSpan(span_id, parent, name, start, "trace", nameless=True, step=step, step_of=step_of)


def test_an_openinference_agent_span_that_is_a_langgraph_nodes_run_is_a_step_of_its_graph():
    metadata = '{"langgraph_step": 1, "langgraph_node": "agent", "langgraph_checkpoint_ns": "%s"}'
    kind = {"openinference.span.kind": "AGENT"}
    top = agents.agent_span("n", "g", {**kind, "metadata": metadata % "agent:99"}, 2, "trace", "agent")
    assert (top.name, top.step, top.step_of) == ("agent", "agent:99", "")
    inner = {**kind, "metadata": metadata % "research_agent:6c|agent:d4"}
    assert agents.agent_span("a", "r", inner, 3, "trace", "agent").step_of == "research_agent:6c"
    # The graph's own span (no node's metadata), and junk, are no step.
    for metadata in (
        '{"thread_id": "t", "ls_integration": "langgraph"}',
        "{",
        '{"langgraph_checkpoint_ns": 5}',
    ):
        found = agents.agent_span("g", "", {**kind, "metadata": metadata}, 1, "trace", "weather_agent")
        assert (found.step, found.step_of) == ("", "")


def test_a_graph_step_calling_the_model_is_part_of_the_invocation_of_the_agent_running_its_graph():
    # LangGraph: weather_agent g (the graph's own span) runs its model node, an AGENT span at each step (n1,
    # n3), whose calls sit under a chain (n1-seq, n3-seq); the tools node t (step 2) is no agent span.
    links = {"g": "", "n1": "g", "n1-seq": "n1", "t": "g", "n3": "g", "n3-seq": "n3"}
    spans = {
        "g": AgentSpan("g", "", "weather_agent", 1, "trace", nameless=True),
        "n1": step_span("n1", "g", "agent", 2, "agent:1", ""),
        "n3": step_span("n3", "g", "agent", 4, "agent:3", ""),
    }
    tree = Tree(links, ())
    parents = ["n1-seq", "n3-seq"]
    kept = agents.without_steps(tree, spans, parents)
    assert sorted(kept) == ["g"]
    found = agents.invocations(tree, agents.acting(tree, kept, parents))
    for parent in parents:
        call = agents.call_agent(parent, None, tree, kept, found)
        assert (call.agent, call.invocation) == ("weather_agent", found["g"])
    # Before the graph's own span arrives, each step is the agent.
    assert agents.without_steps(Tree({"n1": "g", "n1-seq": "n1"}, ()), {"n1": spans["n1"]}, parents) == {
        "n1": spans["n1"]
    }


def test_a_graph_step_running_a_graph_of_its_own_is_an_agent_and_the_rest_stay_agents():
    # team_agent g runs research_agent as a node: the node's span r and the subgraph's rs (the same step),
    # above the subgraph's model node a (its step, with the calls). writer_agent's node and subgraph spans are
    # chains (w): its model node x is a step of a graph no agent span runs. y: a step under a tool of g's.
    links = {"g": "", "r": "g", "rs": "r", "a": "rs", "w": "g", "x": "w", "tool": "g", "y": "tool"}
    spans = {
        "g": AgentSpan("g", "", "team_agent", 1, "trace", nameless=True),
        "r": step_span("r", "g", "research_agent", 2, "research_agent:1", ""),
        "rs": step_span("rs", "r", "research_agent", 2, "research_agent:1", ""),
        "a": step_span("a", "rs", "agent", 3, "research_agent:1|agent:1", "research_agent:1"),
        "x": step_span("x", "w", "agent", 5, "writer:2|agent:1", "writer:2"),
        "y": step_span("y", "tool", "agent", 6, "agent:3", ""),
    }
    tree = Tree(links, {"tool"})
    kept = agents.without_steps(tree, spans, ["a", "x", "y"])
    assert sorted(kept) == ["g", "r", "x", "y"]
    acting = agents.acting(tree, kept, ["a", "x", "y"])
    assert sorted(acting) == ["r", "x", "y"]  # g, without calls of its own, is the workflow around them
    found = agents.invocations(tree, acting, set(kept) - set(acting))
    assert agents.call_agent("a", None, tree, kept, found).invocation == found["r"]
    assert [(found[key].parent, found[key].entered) for key in ("r", "x")] == [
        (None, agents.ROOT),
        ("r", agents.HANDOFF),
    ]


def test_a_handoff_is_a_sibling_whose_node_parent_is_the_agent_before_it():
    # Workflow w; triage (t) and billing (b) are siblings; b's graph.node.parent_id names triage.
    links = {"w": "", "t": "w", "t-turn": "t", "b": "w", "b-turn": "b"}
    spans = [
        agent("t", "w", "triage", 10, node_id="triage"),
        agent("b", "w", "billing", 20, "trace", "billing", "triage"),
    ]
    tree, by_id, found = resolve(links, (), spans)
    assert found["t"] == agents.Invocation("t", "triage", None, agents.ROOT, 0, "t")
    assert found["b"] == agents.Invocation("b", "billing", "t", agents.HANDOFF, 0, "t")
    call = agents.call_agent("b-turn", None, tree, by_id, found)
    assert (call.agent, call.invocation.id) == ("billing", "b")


def test_the_later_top_level_agents_of_one_workflow_are_handed_the_work():
    # strands' swarm: workflow w (a nameless agent span without calls) around researcher r and writer x,
    # which name no handoff; w2 is another request's workflow; s is a subagent of x (not w's own).
    links = {"w": "", "r": "w", "x": "w", "s": "x", "w2": "", "q": "w2"}
    spans = [agent("r", "w", "researcher", 10), agent("x", "w", "writer", 20), agent("s", "x", "helper", 25)]
    spans.append(agent("q", "w2", "researcher", 30))
    tree = Tree(links, ())
    by_id = {span.span_id: span for span in spans}
    found = agents.invocations(tree, by_id, workflows={"w", "w2"})
    assert [(found[key].entered, found[key].parent) for key in ("r", "x", "s", "q")] == [
        (agents.ROOT, None),
        (agents.HANDOFF, "r"),
        (agents.SUBAGENT, "x"),
        (agents.ROOT, None),  # alone in its workflow: a request of its own
    ]
    assert {found[key].root for key in ("r", "x", "s")} == {"r"}
    assert agents.invocations(tree, by_id)["x"].entered == agents.ROOT  # no workflow known: as before


def test_a_node_parent_named_later_or_nowhere_is_no_handoff():
    links = {"w": "", "t": "w", "b": "w"}
    spans = [
        agent("t", "w", "triage", 30, node_id="triage"),
        agent("b", "w", "billing", 20, "trace", "billing", "triage"),
    ]
    assert resolve(links, (), spans)[2]["b"].entered == agents.ROOT
    spans = [agent("b", "w", "billing", 20, "trace", "billing", "nobody")]
    assert resolve(links, (), spans)[2]["b"].entered == agents.ROOT


def test_an_agent_under_a_tool_of_another_is_an_agent_as_tool_or_a_delegation_by_its_session():
    # orchestrator o -> turn -> tool x -> workflow chain -> billing b
    links = {"o": "", "o-turn": "o", "x": "o-turn", "chain": "x", "b": "chain"}
    spans = [agent("o", "", "orchestrator", 1), agent("b", "chain", "billing", 2)]
    found = resolve(links, {"x"}, spans)[2]
    assert found["b"] == agents.Invocation("b", "billing", "o", agents.AGENT_AS_TOOL, 1, "o")
    # pydantic-ai: the child run has a conversation id of its own: a delegation.
    spans = [agent("o", "", "planner", 1, "C1"), agent("b", "chain", "expert", 2, "C2")]
    found = resolve(links, {"x"}, spans)[2]
    assert found["b"] == agents.Invocation("b", "expert", "o", agents.DELEGATION, 1, "o")


def test_an_agent_directly_under_another_is_a_subagent_and_depths_add_up():
    links = {"a": "", "b": "a", "x": "b", "c": "x", "c-call": "c"}
    spans = [agent("a", "", "lead", 1), agent("b", "a", "researcher", 2), agent("c", "x", "reader", 3)]
    tree, by_id, found = resolve(links, {"x"}, spans)
    assert (found["b"].entered, found["b"].depth, found["b"].root) == (agents.SUBAGENT, 1, "a")
    assert (found["c"].entered, found["c"].depth, found["c"].root) == (agents.AGENT_AS_TOOL, 2, "a")


def test_a_call_whose_ancestors_have_not_arrived_keeps_the_agent_it_names():
    tree, by_id, found = resolve({"t": "w"}, (), [agent("t", "w", "triage", 1)])
    assert agents.call_agent("missing", "planner", tree, by_id, found) == agents.CallAgent("planner", None)
    assert agents.call_agent("", None, tree, by_id, found) == agents.CallAgent(None, None)


def test_a_cycle_in_untrusted_parent_ids_ends():
    links = {"a": "b", "b": "a", "t": "a"}
    tree, by_id, found = resolve(links, (), [agent("t", "a", "triage", 1, node_id="t", node_parent_id="t")])
    assert found["t"].entered == agents.ROOT
    assert agents.call_agent("a", None, tree, by_id, found) == agents.CallAgent(None, None)
    # Two agents naming each other as node parents: the earlier one is the root.
    spans = [
        agent("x", "", "x", 1, node_id="x", node_parent_id="y"),
        agent("y", "", "y", 2, node_id="y", node_parent_id="x"),
    ]
    found = resolve({"x": "", "y": ""}, (), spans)[2]
    assert (found["x"].entered, found["y"].entered, found["y"].root) == (agents.ROOT, agents.HANDOFF, "x")


def test_a_child_runs_calls_move_to_the_run_of_their_roots_first_top_level_call():
    root = agents.Invocation("p", "planner", None, agents.ROOT, 0, "p")
    child = agents.Invocation("e", "expert", "p", agents.DELEGATION, 1, "p")
    calls = [
        Placed("c0", 1, 100, "s0", root),
        Placed("c1", 2, 200, "s1", child),
        Placed("c2", 2, 300, "s2", child),
        Placed("c3", 1, 400, "s3", root),
        Placed("other", 3, 50, "s4", None),
    ]
    assert agents.session_runs(calls) == {"c1": 1, "c2": 1}
    # Before the root's own calls arrive, nothing moves: there is no session run to move to yet.
    assert agents.session_runs([call for call in calls if call.run_id != 1]) == {}


def test_a_call_naming_no_run_is_in_the_run_the_nearest_span_above_it_names():
    links = {"root": "", "step": "root", "inner": "step", "call": "inner", "other": "root"}
    keys = {"root": ("S1", "session.id"), "inner": ("C2", "gen_ai.conversation.id")}
    assert agents.declared_key("call", links, keys) == ("C2", "gen_ai.conversation.id")
    assert agents.declared_key("other", links, keys) == ("S1", "session.id")
    assert agents.declared_key("root", links, {}) is None
    assert agents.declared_key("", links, keys) is None
    assert agents.declared_key("a", {"a": "b", "b": "a"}, {}) is None  # a cycle in untrusted ids ends


PARENT_TRACE = "ab" * 16


@pytest.mark.parametrize(
    "links, expected",
    [
        ([{"trace_id": PARENT_TRACE, "span_id": "0a" * 8}], (PARENT_TRACE, "0a" * 8)),
        # Untrusted: a link into the same trace, zero or malformed ids, not a list or a map.
        ([{"trace_id": "cd" * 16, "span_id": "0a" * 8}], None),
        ([{"trace_id": "0" * 32, "span_id": "0a" * 8}], None),
        ([{"trace_id": PARENT_TRACE, "span_id": "0" * 16}], None),
        ([{"trace_id": PARENT_TRACE.upper(), "span_id": "0a" * 8}, {"trace_id": 5, "span_id": None}], None),
        ([["not", "a", "map"], {"trace_id": PARENT_TRACE, "span_id": "0b" * 8}], (PARENT_TRACE, "0b" * 8)),
        ("links", None),
    ],
)
def test_a_root_span_continues_the_first_well_formed_link_into_another_trace(links, expected):
    assert agents.linked_parent("cd" * 16, links) == expected


def test_linked_traces_form_one_group_transitively_and_others_stay_alone():
    groups = agents.trace_groups(["a", "b", "c", "d"], [("b", "a"), ("c", "b"), ("x", "d")])
    assert groups["a"] == groups["b"] == groups["c"] == frozenset({"a", "b", "c"})
    assert groups["d"] == frozenset({"d"})
