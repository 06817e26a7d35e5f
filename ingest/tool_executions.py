"""Tool executions from a trace's tool spans: one execution however many spans tell of it. No Django here.

Users stack instrumentations around a tool as they do around a model request: an agent framework's span
for running the tool (pydantic-ai's ``execute_tool``, OpenInference's TOOL span) wraps an MCP client's
``tools/call`` span, under which the MCP server's own ``tools/call`` span continues the trace. A
tool-execution span whose nearest enclosing tool span runs the same tool, with no agent invocation or model
call in between, is part of that one's execution (the spans between, such as a transport's, do not
matter). The outermost span is the execution, the one that answers the model's tool call; what the inner
spans add is kept: a figure it lacks (the tool call id, the sizes of arguments and result), and their
details (an MCP span's method, session and server), each from the outermost span that carries it.

Spans arrive in any order (the framework's span ends, and so arrives, after the MCP spans inside it): the
rule works on whatever part of the tree is stored, and gives the same executions once all of it is.
"""

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

# An ancestor chain longer than this is a cycle in untrusted parent ids (or absurd): stop there.
MAX_DEPTH = 512


@dataclass(frozen=True)
class ToolSpan:
    """What one tool-execution span says (a stored ``Operation`` of kind tool)."""

    span_id: str
    parent_span_id: str
    name: str
    start_ns: int
    end_ns: int
    call_id: str = ""
    arguments_bytes: int | None = None
    result_bytes: int | None = None
    details: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    """One execution of a tool: its outermost span, completed from the spans inside it."""

    span_id: str  # the outermost span's
    name: str
    start_ns: int
    end_ns: int
    call_id: str
    arguments_bytes: int | None
    result_bytes: int | None
    details: dict
    spans: tuple[str, ...]  # every span that tells of it, outermost first


def _same_tool(one: str, other: str) -> bool:
    return one.strip().casefold() == other.strip().casefold()


def enclosing(
    span: ToolSpan, tools: Mapping[str, ToolSpan], links: Mapping[str, str], stops: Collection[str]
) -> str | None:
    """The tool span whose execution ``span`` is part of: its nearest enclosing tool span when that runs
    the same tool and no agent invocation or model call (``stops``) lies between; None otherwise, or when
    the chain reaches a span not stored (yet)."""
    seen = {span.span_id}
    current = links.get(span.span_id) or span.parent_span_id
    while current and current not in seen and len(seen) <= MAX_DEPTH:
        if current in stops:
            return None
        outer = tools.get(current)
        if outer is not None:
            return current if _same_tool(outer.name, span.name) else None
        seen.add(current)
        current = links.get(current, "")
    return None


def executions(
    spans: Iterable[ToolSpan], links: Mapping[str, str] | None = None, stops: Collection[str] = ()
) -> list[Execution]:
    """The trace's tool executions in start order, one per outermost tool span.

    ``links``: span id -> parent span id of the trace's stored spans (the tool spans' own parents are
    known without it); ``stops``: the trace's agent-invocation and model-call span ids."""
    tools = {span.span_id: span for span in spans}
    links = links or {}
    outer_of = {span_id: enclosing(span, tools, links, stops) for span_id, span in tools.items()}

    def root(span_id: str) -> tuple[str, int]:
        """The outermost span of the span's execution, and how many spans lie between them."""
        path = {span_id: 0}  # span id -> its place on the way up
        while (up := outer_of[span_id]) is not None:
            if up in path:  # a cycle in untrusted parent ids: one execution, named by its lowest id
                return min(span for span, place in path.items() if place >= path[up]), len(path)
            path[up] = len(path)
            span_id = up
        return span_id, len(path) - 1

    members: dict[str, list[tuple[int, ToolSpan]]] = {}
    for span_id, span in tools.items():
        top, depth = root(span_id)
        members.setdefault(top, []).append((0 if span_id == top else depth, span))
    found = []
    for top, group in members.items():
        outermost = tools[top]
        # Outermost first, each span before those inside it.
        ordered = [
            span for _, span in sorted(group, key=lambda pair: (pair[0], pair[1].start_ns, pair[1].span_id))
        ]
        details: dict = {}
        for span in ordered:
            for key, value in span.details.items():
                details.setdefault(key, value)
        found.append(
            Execution(
                span_id=top,
                name=outermost.name,
                start_ns=outermost.start_ns,
                end_ns=outermost.end_ns,
                call_id=next((span.call_id for span in ordered if span.call_id), ""),
                arguments_bytes=next(
                    (span.arguments_bytes for span in ordered if span.arguments_bytes is not None), None
                ),
                result_bytes=next(
                    (span.result_bytes for span in ordered if span.result_bytes is not None), None
                ),
                details=details,
                spans=tuple(span.span_id for span in ordered),
            )
        )
    return sorted(found, key=lambda execution: (execution.start_ns, execution.span_id))
