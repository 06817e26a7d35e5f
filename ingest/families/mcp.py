"""MCP's own spans (the OTel conventions for the Model Context Protocol): the ``mcp`` SDK traces itself
(tracer ``mcp-python-sdk``), as does fastmcp's client and server. No Django here.

A span per request, named ``{mcp.method.name} {target}`` (the SDK's client span: ``MCP send tools/call
get_weather``), with ``mcp.method.name``, ``mcp.session.id`` (streamable HTTP only), ``mcp.protocol.version``
and, over HTTP, ``server.address`` / ``server.port``. A ``tools/call`` is a tool execution whether or not
it says ``gen_ai.operation.name=execute_tool`` (the SDK's server span does, its client span does not); the
client and server spans of one call, and the agent framework's own tool span around them, are one
execution (``ingest.tool_executions``).
"""

from ingest.families.base import TOOL, Family

METHOD_NAME = "mcp.method.name"
SESSION_ID = "mcp.session.id"
PROTOCOL_VERSION = "mcp.protocol.version"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
NETWORK_TRANSPORT = "network.transport"
TOOLS_CALL = "tools/call"

# What an MCP span adds to the tool execution it tells of: the method, the session and the server.
DETAIL_KEYS = (METHOD_NAME, SESSION_ID, PROTOCOL_VERSION, SERVER_ADDRESS, SERVER_PORT, NETWORK_TRANSPORT)


def _method(attributes: dict) -> str:
    method = attributes.get(METHOD_NAME)
    return method.strip() if isinstance(method, str) else ""


def kind_of(name: str, attributes: dict) -> str | None:
    return TOOL if _method(attributes) == TOOLS_CALL else None


def tool_name(name: str, attributes: dict) -> str:
    """The tool a ``tools/call`` span calls, from its name's target (``… tools/call <tool>``)."""
    method = _method(attributes)
    if method != TOOLS_CALL:
        return ""
    _, found, target = name.partition(f"{method} ")
    return target.strip() if found else ""


def tool_details(attributes: dict) -> dict:
    """The MCP facts of an MCP span (method, session, protocol, server), as sent; none on other spans."""
    if not _method(attributes):
        return {}
    details = {}
    for key in DETAIL_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value.strip():
            details[key] = value.strip()[:200]
        elif isinstance(value, int) and not isinstance(value, bool):
            details[key] = value
    return details


FAMILY = Family(name="mcp", kind_of=kind_of, tool_name=tool_name, tool_details=tool_details)
