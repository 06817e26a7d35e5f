"""Story 4, "research brief": a lead agent delegating to a researcher sub-agent, one real cache break.

Two turns, six calls, two agents, each with its own instructions and tools (so its own cache chain).
Turn 1: the lead asks the researcher (through its `delegate_research` tool) to look into a question; the
researcher searches, reads a page and answers (three calls); the lead writes the brief from the answer.
Turn 2: the app has changed the lead's instructions (a citation rule added): the lead's cache breaks
once, at its first call of the turn, against its own previous call (`system_changed`). The switches
between the agents are no breaks, and the researcher's first call shows the packet it was handed (the
lead's question).
"""

import random
from datetime import UTC, datetime, timedelta

from ctxview.demo.recorder import Piece, Recorder
from ctxview.demo.text import prose, tool_definition

RUN_ID = "demo-research-brief"
SERVICE = "research-agents"
MODEL = "claude-sonnet-4-5"
START = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
LEAD = "lead"
RESEARCHER = "researcher"
CITATION_RULE = "From now on, cite every source inline with its URL."
RUN = {"ctxview.run.id": RUN_ID}


def _agent(name: str) -> dict:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **RUN}


def _tool(name: str) -> dict:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, **RUN}


def _tools(rng: random.Random, names: tuple[str, ...]) -> list[Piece]:
    parameters = {"query": {"type": "string"}}
    return [
        Piece(f"tool:{name}", "tool", "tools", tool_definition(rng, name, parameters, 12), trust="system")
        for name in names
    ]


def _message(item_id: str, role: str, text: str, turn: int, kind: str = "message") -> Piece:
    bucket = "tool_results" if kind == "tool_result" else "conversation"
    trust = "tool" if kind == "tool_result" else role if role == "user" else None
    return Piece(item_id, kind, bucket, text, role=role, trust=trust, origin_turn=turn)


def record() -> Recorder:
    rng = random.Random(404)
    recorder = Recorder(RUN_ID, MODEL)
    lead_prompt = "You lead a research team and write briefs for the product council. " + prose(rng, 60)
    lead_tools = _tools(rng, ("delegate_research",))
    lead_system = Piece("system:lead", "system", "system", lead_prompt, role="system", trust="system")
    researcher_tools = _tools(rng, ("web_search", "read_page"))
    researcher_system = Piece(
        "system:researcher",
        "system",
        "system",
        "You research one question and answer with sources. " + prose(rng, 60),
        role="system",
        trust="system",
    )
    ask = _message("msg:user-1", "user", "Write a one-page brief: is prompt caching worth it for us?", 1)
    question = "How much do providers discount cached input tokens, and what invalidates the cache?"
    delegate = _message("msg:lead-1", "assistant", "Asking the researcher.", 1)
    at = START
    lead: list[Piece] = [*lead_tools, lead_system, ask]

    with recorder.span(f"invoke_agent {LEAD}", _agent(LEAD), at):
        recorder.call(1, at, lead, tool_calls=["delegate_research"], output_tokens=60, agent=LEAD)
        at += timedelta(seconds=8)
        with recorder.span("execute_tool delegate_research", _tool("delegate_research"), at):
            with recorder.span(f"invoke_agent {RESEARCHER}", _agent(RESEARCHER), at):
                # The packet: what the lead handed over is the question, as the researcher's user message.
                research = [
                    *researcher_tools,
                    researcher_system,
                    _message("msg:question", "user", question, 1),
                ]
                steps = (
                    ("web_search", "Searching.", "search results: " + prose(rng, 6)),
                    ("read_page", "Reading the pricing page.", "page text: " + prose(rng, 10)),
                )
                for number, (tool, said, result) in enumerate(steps, 1):
                    recorder.call(1, at, research, tool_calls=[tool], output_tokens=50, agent=RESEARCHER)
                    at += timedelta(seconds=10)
                    research = [
                        *research,
                        _message(f"msg:researcher-{number}", "assistant", said, 1),
                        _message(f"result:{tool}", "user", result, 1, kind="tool_result"),
                    ]
                recorder.call(1, at, research, output_tokens=220, agent=RESEARCHER)
                answer = "Findings: " + prose(rng, 8)
        at += timedelta(seconds=15)
        lead = [*lead, delegate, _message("result:research", "user", answer, 1, kind="tool_result")]
        recorder.call(1, at, lead, output_tokens=400, agent=LEAD)
        lead.append(_message("msg:brief", "assistant", "Brief: " + prose(rng, 10), 1))

    at += timedelta(seconds=90)
    with recorder.span(f"invoke_agent {LEAD}", _agent(LEAD), at):
        # The app changed the lead's instructions between the turns: its one real cache break.
        revised = Piece(
            "system:lead", "system", "system", f"{lead_prompt} {CITATION_RULE}", role="system", trust="system"
        )
        follow_up = _message("msg:user-2", "user", "Add the sources, please.", 2)
        lead = [*lead_tools, revised, *lead[len(lead_tools) + 1 :], follow_up]
        recorder.call(2, at, lead, output_tokens=300, prompt_version="v2", agent=LEAD)
    return recorder
