"""Agent invocations and sessions from a trace's span tree. No Django here.

A run is a session; inside it every call belongs to an *agent invocation*: an agent span (OTel GenAI
``invoke_agent``, an OpenInference AGENT span, pydantic-ai's ``agent run``) that names its agent, or one
named only by its span's name that has calls of its own (smolagents' ``researcher.run``; one without
calls of its own is a workflow around agents, as openai-agents' ``Agent workflow``). The call's
invocation is its nearest agent ancestor. An invocation is entered:

* ``root``: it has no parent invocation;
* ``handoff``: OpenInference's ``graph.node.parent_id`` names an earlier invocation that is not its
  ancestor (openai-agents runs the agent it hands off to as a sibling span); or it is a later top-level
  invocation of the same workflow (a workflow span serves one request: strands' ``invoke_swarm``);
* ``agent_as_tool``: its nearest agent ancestor reaches it through a tool span;
* ``delegation``: the same, but the child runs under its own session key (pydantic-ai gives each
  child run its own ``gen_ai.conversation.id``): a child run that belongs in its parent's session;
* ``subagent``: directly under another agent span, no tool in between.

An agent span may be one step of a graph run (the family says so: LangGraph's node runs, which
OpenInference marks AGENT by their name at every step): a step that makes model calls of its own is the
graph's work, part of the invocation of the agent span that runs its graph (its nearest agent span above,
no tool between: the graph's own span, or the node that runs it as a subgraph), and so is the same step
told twice (a node and the subgraph it runs). A step holding only a graph of its own (a subgraph) is an
agent of its own. So a graph named ``weather_agent`` invoked twice is two invocations of
``weather_agent``, not one invocation of its model node ``agent`` per step.

An agent span may declare the agent's sub-agents (smolagents' managed agents): its model calls them as
tools, so they are tools its calls offer beside the calls' own definitions (``CallAgent.tools``).

Calls of invocations entered as a tool, by delegation or as a subagent are *nested* (depth > 0): they
start no turn. Every invocation has a root (follow parents, handoffs included), and all calls under
one root belong in one session: the run of the root's earliest top-level call.

A call that names no run of its own (no session or conversation id: its run is its trace's) is in the run
the nearest span above it names, whatever that span is (a workflow or chain span, the user's own span
around the agent): a session declared once for an invocation or a trace applies inside it.

A child agent may run in a trace of its own (another process, a queued job): the root span of that trace
then names the span it continues by an OTel span link, and that span is its parent. The traces linked
so form one tree, and the child's calls join the parent's session as in one trace.

Spans arrive in any order (an agent span ends, and so arrives, after its calls): the resolution works
on whatever part of the tree is stored, and is simply run again when more of it arrives.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ingest import families, semconv

ROOT = "root"
HANDOFF = "handoff"
AGENT_AS_TOOL = "agent_as_tool"
DELEGATION = "delegation"
SUBAGENT = "subagent"
ENTRIES = (ROOT, HANDOFF, AGENT_AS_TOOL, DELEGATION, SUBAGENT)

# An ancestor chain longer than this is a cycle in untrusted parent ids (or absurd): stop there.
MAX_DEPTH = 512


@dataclass(frozen=True)
class AgentSpan:
    """What an agent span says about its invocation."""

    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    run_key: str
    node_id: str = ""  # OpenInference graph.node.id
    node_parent_id: str = ""  # OpenInference graph.node.parent_id
    # Named only by the span's name (smolagents' ``researcher.run``): an agent if it has calls of its own
    # (``acting``), else a workflow around other agents (openai-agents' ``Agent workflow``).
    nameless: bool = False
    sub_agents: tuple[str, ...] = ()  # the sub-agents it declares, by name
    # One step of a graph run: the step, and the graph it is a step of ("" for the top graph, run by a span
    # that is no step); both "" when the span is no step.
    step: str = ""
    step_of: str = ""


@dataclass(frozen=True)
class Invocation:
    id: str  # the agent span's id
    agent: str
    parent: str | None
    entered: str
    depth: int  # 0: the session's top level; one more for each tool, delegation or subagent entered
    root: str  # the invocation at the top of its chain


@dataclass(frozen=True)
class CallAgent:
    """A call's agent, as far as the stored part of the tree tells."""

    agent: str | None
    invocation: Invocation | None
    # Tools the calls offer beyond their own definitions: the sub-agents their agent's span declares.
    tools: tuple[str, ...] = ()


def _text(attributes: Mapping, keys: Iterable[str]) -> str:
    for key in keys:
        value = attributes.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()[:200]
    return ""


def agent_span(
    span_id: str, parent_span_id: str, attributes: Mapping, start_ns: int, run_key: str, span_name: str = ""
) -> AgentSpan | None:
    """The agent span's invocation; one that names no agent in its attributes is named by its span's
    name and marked ``nameless`` (None without either)."""
    node_id = _text(attributes, (semconv.GRAPH_NODE_ID,))
    # OpenInference's graph.node.id names the agent's node where nothing else names it (CrewAI: its role).
    name = _text(attributes, semconv.AGENT_NAME) or _text(attributes, semconv.AGENT_ID) or node_id
    nameless = not name
    name = name or span_name.strip()[:200]
    if not name:
        return None
    step, step_of = families.graph_step(attributes) or ("", "")
    return AgentSpan(
        span_id=span_id,
        parent_span_id=parent_span_id,
        name=name,
        nameless=nameless,
        start_ns=start_ns,
        run_key=run_key,
        node_id=node_id,
        node_parent_id=_text(attributes, (semconv.GRAPH_NODE_PARENT_ID,)),
        sub_agents=families.sub_agents(attributes),
        step=step,
        step_of=step_of,
    )


def _ancestors(span_id: str, parents: Mapping[str, str]) -> Iterable[str]:
    """The stored ancestors of a span, nearest first; stops at a span not stored (yet)."""
    seen = {span_id}
    current = parents.get(span_id, "")
    while current and current not in seen and len(seen) <= MAX_DEPTH:
        yield current
        seen.add(current)
        current = parents.get(current, "")


class Tree(dict):
    """A trace's stored span links (span id -> parent span id) and which spans are tool executions."""

    def __init__(self, links: Mapping[str, str], tools: Iterable[str]) -> None:
        super().__init__(links)
        self.tools = frozenset(tools)


def nearest_agent(
    parent_span_id: str, tree: Tree, agents: Mapping[str, AgentSpan]
) -> tuple[AgentSpan | None, bool]:
    """The nearest agent span at or above ``parent_span_id``, and whether a tool span lies between."""
    through_tool = False
    chain = [parent_span_id, *_ancestors(parent_span_id, tree)] if parent_span_id else []
    for span_id in chain:
        if span_id in agents:
            return agents[span_id], through_tool
        through_tool = through_tool or span_id in tree.tools
    return None, through_tool


def without_steps(
    tree: Tree, agents: Mapping[str, AgentSpan], call_parents: Iterable[str]
) -> dict[str, AgentSpan]:
    """The agent spans without the graph steps that are part of their graph's agent's invocation: a step
    whose nearest agent span above (no tool between) runs its graph, when the step makes model calls of its
    own (it is some call's nearest agent span), or that is the same step (a node and the subgraph it runs).
    Its calls then belong to that agent span's invocation (or to the one that span is part of)."""
    calling = set()
    for parent in call_parents:
        agent, _ = nearest_agent(parent, tree, agents)
        if agent is not None and agent.step:
            calling.add(agent.span_id)
    parts = set()
    for agent in agents.values():
        if not agent.step:
            continue
        runner, through_tool = nearest_agent(agent.parent_span_id, tree, agents)
        if runner is None or through_tool:
            continue
        if agent.step == runner.step or (agent.span_id in calling and agent.step_of == runner.step):
            parts.add(agent.span_id)
    return {span_id: agent for span_id, agent in agents.items() if span_id not in parts}


def acting(tree: Tree, agents: Mapping[str, AgentSpan], call_parents: Iterable[str]) -> dict[str, AgentSpan]:
    """The agent spans that are invocations: every named one, and each nameless one that is the nearest
    agent span of a call (it has calls of its own). A nameless span holding only other agents' spans is
    a workflow around them, not an agent: their parent, not an invocation they were entered from. (So a
    call's nearest agent span is the same among these as among all.)"""
    used = set()
    for parent in call_parents:
        agent, _ = nearest_agent(parent, tree, agents)
        if agent is not None and agent.nameless:
            used.add(agent.span_id)
    return {span_id: agent for span_id, agent in agents.items() if not agent.nameless or span_id in used}


def invocations(
    tree: Tree, agents: Mapping[str, AgentSpan], workflows: Iterable[str] = ()
) -> dict[str, Invocation]:
    """Every agent span's invocation: its parent, how it was entered, its depth and root.

    ``workflows``: the spans of workflows around agents (``acting`` left them out). A workflow serves one
    request, so of the top-level invocations in one workflow each after the first was handed the work
    by the one before it (strands' swarm, whose spans name no handoff)."""
    direct: dict[str, tuple[str | None, str]] = {}
    by_node: dict[str, list[AgentSpan]] = {}
    for agent in agents.values():
        if agent.node_id:
            by_node.setdefault(agent.node_id, []).append(agent)
    in_workflow = _in_workflow(tree, agents, frozenset(workflows))
    for agent in agents.values():
        ancestor, through_tool = nearest_agent(agent.parent_span_id, tree, agents)
        handed_from = _handed_from(agent, by_node, tree)
        before = in_workflow.get(agent.span_id)
        if handed_from is not None and (ancestor is None or handed_from.span_id != ancestor.span_id):
            direct[agent.span_id] = (handed_from.span_id, HANDOFF)
        elif ancestor is None and before is not None:
            direct[agent.span_id] = (before.span_id, HANDOFF)
        elif ancestor is None:
            direct[agent.span_id] = (None, ROOT)
        elif not through_tool:
            direct[agent.span_id] = (ancestor.span_id, SUBAGENT)
        elif agent.run_key != ancestor.run_key:
            direct[agent.span_id] = (ancestor.span_id, DELEGATION)
        else:
            direct[agent.span_id] = (ancestor.span_id, AGENT_AS_TOOL)

    result: dict[str, Invocation] = {}
    for span_id, (parent, entered) in direct.items():
        depth, root, current, seen = 0, span_id, span_id, {span_id}
        while True:
            up, how = direct[current]
            if up is None or up in seen or len(seen) > MAX_DEPTH:
                break
            depth += how not in (ROOT, HANDOFF)
            root, current = up, up
            seen.add(up)
        result[span_id] = Invocation(span_id, agents[span_id].name, parent, entered, depth, root)
    return result


def _in_workflow(
    tree: Tree, agents: Mapping[str, AgentSpan], workflows: frozenset[str]
) -> dict[str, AgentSpan]:
    """Top-level invocation -> the one before it in the same workflow (the nearest workflow above both,
    with no agent between)."""
    members: dict[str, list[AgentSpan]] = {}
    for agent in agents.values():
        for span_id in _ancestors(agent.span_id, tree):
            if span_id in agents:
                break  # inside another agent: not one of the workflow's own
            if span_id in workflows:
                members.setdefault(span_id, []).append(agent)
                break
    before = {}
    for agents_in in members.values():
        ordered = sorted(agents_in, key=lambda agent: (agent.start_ns, agent.span_id))
        before.update({later.span_id: earlier for earlier, later in zip(ordered, ordered[1:], strict=False)})
    return before


def _handed_from(agent: AgentSpan, by_node: Mapping[str, list[AgentSpan]], tree: Tree) -> AgentSpan | None:
    """The invocation an agent was handed off from: the latest earlier one of the node its parent id names."""
    if not agent.node_parent_id or agent.node_parent_id == agent.node_id:
        return None
    earlier = [
        other
        for other in by_node.get(agent.node_parent_id, ())
        if (other.start_ns, other.span_id) < (agent.start_ns, agent.span_id)
        and agent.span_id not in _ancestors(other.span_id, tree)  # not its own descendant
    ]
    return max(earlier, key=lambda other: (other.start_ns, other.span_id), default=None)


def call_agent(
    parent_span_id: str,
    own_agent: str | None,
    tree: Tree,
    agents: Mapping[str, AgentSpan],
    resolved: Mapping[str, Invocation],
) -> CallAgent:
    """The call's invocation (its nearest agent ancestor), agent and the sub-agents that agent offers as
    tools; else the agent the call names itself."""
    agent, _ = nearest_agent(parent_span_id, tree, agents)
    if agent is None:
        return CallAgent(own_agent or None, None)
    return CallAgent(agent.name, resolved[agent.span_id], agent.sub_agents)


@dataclass(frozen=True)
class Placed:
    """A call of the trace: where it is and what it belongs to."""

    key: object  # the caller's handle for the call
    run_id: int
    start_ns: int
    span_id: str
    invocation: Invocation | None


def session_runs(calls: Iterable[Placed]) -> dict[object, int]:
    """Calls to move into their session's run: a child run's calls go to the run of their root invocation's
    earliest top-level call (the one with the lowest (start, span id), so arrival order does not matter)."""
    first: dict[str, Placed] = {}
    calls = list(calls)
    for call in calls:
        invocation = call.invocation
        if invocation is None or invocation.depth:
            continue
        best = first.get(invocation.root)
        if best is None or (call.start_ns, call.span_id) < (best.start_ns, best.span_id):
            first[invocation.root] = call
    moves = {}
    for call in calls:
        if call.invocation is None or call.invocation.root not in first:
            continue
        target = first[call.invocation.root].run_id
        if call.run_id != target:
            moves[call.key] = target
    return moves


def declared_key(
    span_id: str, parents: Mapping[str, str], keys: Mapping[str, tuple[str, str]]
) -> tuple[str, str] | None:
    """The run key (value, attribute) that the nearest span at or above ``span_id`` names, if one does.

    ``parents``: the trace's stored span links; ``keys``: the stored spans that name a run, by span id."""
    for current in [span_id, *_ancestors(span_id, parents)] if span_id else []:
        if current in keys:
            return keys[current]
    return None


def linked_parent(trace_id: str, links: object) -> tuple[str, str] | None:
    """The span (trace id, span id) a trace's root span continues: its first span link into another
    trace, when the ids are well formed (links are untrusted)."""
    for link in links if isinstance(links, list) else ():
        if not isinstance(link, Mapping):
            continue
        trace, span = link.get("trace_id"), link.get("span_id")
        if not (isinstance(trace, str) and isinstance(span, str)) or trace == trace_id:
            continue
        if _hex_id(trace, 32) and _hex_id(span, 16):
            return trace, span
    return None


def _hex_id(value: str, size: int) -> bool:
    return len(value) == size and value.strip("0") != "" and all(c in "0123456789abcdef" for c in value)


def trace_groups(traces: Iterable[str], edges: Iterable[tuple[str, str]]) -> dict[str, frozenset[str]]:
    """Each trace's group: the traces joined to it by links (either way, transitively)."""
    parent = {trace: trace for trace in traces}

    def top(trace: str) -> str:
        while parent[trace] != trace:
            parent[trace] = parent[parent[trace]]
            trace = parent[trace]
        return trace

    for one, other in edges:
        if one in parent and other in parent:
            parent[top(one)] = top(other)
    members: dict[str, set[str]] = {}
    for trace in parent:
        members.setdefault(top(trace), set()).add(trace)
    return {trace: frozenset(members[top(trace)]) for trace in parent}
