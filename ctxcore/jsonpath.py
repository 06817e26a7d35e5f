"""The place of a value in a JSON document, in words: ``calls[0].items[1].hash``. No Django here."""

import json
import re
from collections.abc import Iterable

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def where(path: Iterable[str | int], root: str = "the document") -> str:
    """``path`` (keys and list indexes from the top) as one reads it; a key that is not a plain name is
    quoted (``contents["2265…"]``), so a path can be read back; ``root`` where the path is empty."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _NAME.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part[:100])}]"
    return text or root
