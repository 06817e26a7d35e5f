"""Messages and tools flattened into indexed attribute keys (``<prefix>.<i>.<field>``), as OpenInference
(``llm.input_messages.0.message.role``) and OpenLLMetry (``gen_ai.prompt.0.role``) send them. No Django.

The walk over the indexes is shared; what one entry's keys are called is each family's, in its module.
"""

from collections.abc import Callable
from typing import Any

from ingest.families.base import MessagesReader, Read
from ingest.families.messages import Event, indexed, nest


def entries(attributes: dict, prefix: str) -> list:
    """The values under ``prefix.0``, ``prefix.1``, … (each a dict of its keys, or a plain value)."""
    return indexed(nest(attributes, prefix))


def messages_reader(prefix: str, read_entry: Callable[[Any], dict | None]) -> MessagesReader:
    """A reader of the messages under ``prefix``: ``read_entry`` makes one message of an entry (None: not
    a message). No entry at all is None (this family's keys are not there); any is the prefix's content."""

    def read(attributes: dict, content: dict, events: list[Event]) -> Read:
        found = entries(attributes, prefix)
        if not found:
            return None, []
        messages = [built for entry in found if (built := read_entry(entry)) is not None]
        return messages, [prefix + "."]

    return read


def read_tools(attributes: dict, prefix: str, read_entry: Callable[[dict], dict | None]) -> Read:
    """The tool definitions under ``prefix``: ``read_entry`` makes one of an entry's keys (None: none)."""
    tools = [
        tool
        for entry in entries(attributes, prefix)
        if isinstance(entry, dict) and (tool := read_entry(entry)) is not None
    ]
    return (tools, [prefix + "."]) if tools else (None, [])
